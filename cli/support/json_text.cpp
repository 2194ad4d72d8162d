// JSON documents for Ferry's tools: see cli/support/json_text.hpp.
#include "cli/support/json_text.hpp"

#include "report/json_text.hpp"

namespace ferry::cli {

std::string json_dump(const nlohmann::json& value, int indent) { return detail::json_dump(value, indent); }

nlohmann::json report_json(const Report& report) { return detail::report_json(report); }

}  // namespace ferry::cli
