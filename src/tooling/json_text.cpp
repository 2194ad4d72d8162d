// JSON documents for Ferry's tools: see ferry_tooling/json_text.hpp.
#include "ferry_tooling/json_text.hpp"

#include "report/json_text.hpp"

namespace ferry::tooling {

std::string json_dump(const nlohmann::json& value, int indent) { return detail::json_dump(value, indent); }

nlohmann::json report_json(const Report& report) { return detail::report_json(report); }

}  // namespace ferry::tooling
