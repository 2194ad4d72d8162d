// A program built against an installed (or added) Ferry, as a user's would be: writes a file, reads it with
// ferry::File into host memory, and checks every byte. Exit 0 when they match. Usage: downstream FILE
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <vector>

#include <ferry/ferry.hpp>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: downstream FILE\n";
    return 2;
  }
  const std::string path = argv[1];
  std::vector<char> written(3 * 1024 * 1024 + 17);  // three tasks' worth and a tail
  for (std::size_t i = 0; i < written.size(); ++i) written[i] = static_cast<char>((i * 131 + 7) % 251);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(written.data(), static_cast<std::streamsize>(written.size()));
    if (!out) {
      std::cerr << "could not write " << path << "\n";
      return 1;
    }
  }

  auto file = ferry::File::open(path, "r");
  if (!file.ok()) {
    std::cerr << file.status().to_string() << "\n";
    return 1;
  }
  std::vector<char> got(written.size(), 0);
  auto read = file->pread(got.data(), got.size(), 0).get();
  if (!read.ok()) {
    std::cerr << read.status().to_string() << "\n";
    return 1;
  }
  if (read->bytes != written.size() || got != written) {
    std::cerr << "read " << read->bytes << " bytes of " << written.size() << ": the bytes differ\n";
    return 1;
  }
  std::cout << "downstream: read " << read->bytes << " bytes, all match: " << read->report.summary() << "\n";
  return file->close().ok() ? 0 : 1;
}
