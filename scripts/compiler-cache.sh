# Sourced by scripts/build.sh and scripts/test.sh: every compile of the run (the main build, the ThreadSanitizer
# build, the packaging checks' builds of the same sources) goes through ccache where it is installed (Debian's
# masquerading links in /usr/lib/ccache, first on PATH), so a check that compiles Ferry again from another
# folder laid out as this one (the unpacked sdist of scripts/check-sdist.sh) is served from the cache. Paths
# under the checkout hash relative to the build directory, and the build directory itself is not hashed.
if [ -d /usr/lib/ccache ] && [[ ":$PATH:" != *":/usr/lib/ccache:"* ]]; then
  export PATH=/usr/lib/ccache:$PATH
fi
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
