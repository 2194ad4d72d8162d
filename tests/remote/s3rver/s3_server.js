// Starts an S3-compatible server (the @20minutes/s3rver fork, which checks SigV4 signatures) on loopback
// for Ferry's remote tests, fills one bucket from a directory, and prints "port N" once it serves.
//   node tests/remote/s3rver/s3_server.js DATA_DIR BUCKET SOURCE_DIR
// Every regular file under SOURCE_DIR becomes an object named by its relative path. The credentials are
// the server's built-in pair (access key S3RVER, secret S3RVER). It stops on SIGTERM or when stdin closes.
'use strict';

const fs = require('fs');
const path = require('path');
const S3rver = require('@20minutes/s3rver');
const S3Object = require('@20minutes/s3rver/lib/models/object');

async function main() {
  const [dataDir, bucket, sourceDir] = process.argv.slice(2);
  if (!dataDir || !bucket || !sourceDir) {
    console.error('usage: node s3_server.js DATA_DIR BUCKET SOURCE_DIR');
    process.exit(2);
  }
  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    directory: dataDir,
    silent: true,
    vhostBuckets: false,
    configureBuckets: [{ name: bucket }],
  });
  const address = await server.run();
  const walk = (dir) =>
    fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
      const full = path.join(dir, entry.name);
      return entry.isDirectory() ? walk(full) : entry.isFile() ? [full] : [];
    });
  for (const file of walk(sourceDir)) {
    const key = path.relative(sourceDir, file).split(path.sep).join('/');
    const content = fs.readFileSync(file);
    await server.store.putObject(new S3Object(bucket, key, content, {}));
  }
  const stop = () => server.close().then(() => process.exit(0), () => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.stdin.on('end', stop);
  process.stdin.resume();
  process.stdout.write(`port ${address.port}\n`);
}

main().catch((err) => {
  console.error(`s3_server.js: ${err.stack || err}`);
  process.exit(1);
});
