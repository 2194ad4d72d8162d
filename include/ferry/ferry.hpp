// ferry/ferry.hpp: the whole public API.
#pragma once

#include "ferry/config.hpp"
#include "ferry/file.hpp"
#include "ferry/memory.hpp"
#include "ferry/page_cache.hpp"
#include "ferry/remote.hpp"
#include "ferry/route.hpp"
#include "ferry/safetensors.hpp"
#include "ferry/status.hpp"
