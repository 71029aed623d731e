#!/usr/bin/env node
// Runs the native interlink-p2p binary of the platform package npm installed beside
// this launcher (one per platform, in optionalDependencies: npm installs only the one
// whose os/cpu/libc match), with this process's arguments, stdio and exit status.
//
// The binary inherits stdin and stdout, so an MCP host talks to it directly; this
// process only forwards termination signals and passes the exit status back.
'use strict';

const { spawn } = require('node:child_process');
const path = require('node:path');

const PACKAGES = {
  'linux x64': '@interlink-p2p/linux-x64',
  'linux arm64': '@interlink-p2p/linux-arm64',
  'darwin x64': '@interlink-p2p/darwin-x64',
  'darwin arm64': '@interlink-p2p/darwin-arm64',
  'win32 x64': '@interlink-p2p/win32-x64',
};

function fail(message) {
  // stderr only: stdout belongs to the MCP server's JSON-RPC.
  process.stderr.write(`interlink-p2p: ${message}\n`);
  process.exit(1);
}

function binaryPath() {
  const override = process.env.INTERLINK_P2P_BINARY;
  if (override) return override;
  const platform = `${process.platform} ${process.arch}`;
  const pkg = PACKAGES[platform];
  if (!pkg) {
    fail(
      `no prebuilt binary for ${platform}; build it from source with ` +
        '`cargo install --locked interlink-p2p` (see docs/INSTALL.md)',
    );
  }
  let dir;
  try {
    dir = path.dirname(require.resolve(`${pkg}/package.json`));
  } catch {
    fail(
      `the platform package ${pkg} is not installed: npm skips optional ` +
        'dependencies with --omit=optional (or --no-optional); reinstall without it',
    );
  }
  const exe = process.platform === 'win32' ? 'interlink-p2p.exe' : 'interlink-p2p';
  return path.join(dir, 'bin', exe);
}

const binary = binaryPath();
const child = spawn(binary, process.argv.slice(2), { stdio: 'inherit', windowsHide: true });

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'];
for (const signal of SIGNALS) {
  process.on(signal, () => child.kill(signal));
}
child.on('error', (error) => fail(`cannot run ${binary}: ${error.message}`));
child.on('exit', (code, signal) => {
  if (signal) {
    // Die of the same signal, so the host sees what the binary did.
    for (const s of SIGNALS) process.removeAllListeners(s);
    process.kill(process.pid, signal);
  } else {
    process.exit(code ?? 1);
  }
});
