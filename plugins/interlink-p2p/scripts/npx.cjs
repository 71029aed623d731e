#!/usr/bin/env node
// Runs npm's npx with this process's arguments, stdio and exit status, through the node
// that runs this script and without a shell.
//
// Why not `npx` itself as the command: on Windows npx is a .cmd script, which a host
// that spawns its command directly (Claude Code, anthropics/claude-code#58510) cannot
// start (ENOENT), and which Node.js only starts through cmd.exe. `node` is an
// executable on every platform, and npm installs npx-cli.js beside it: in
// <node dir>/node_modules/npm (the Windows installer) or <prefix>/lib/node_modules/npm
// (Unix). Where neither is (a version manager's shim), npx on PATH is the fallback.
'use strict';

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const dir = path.dirname(process.execPath);
const cli = [
  path.join(dir, 'node_modules', 'npm', 'bin', 'npx-cli.js'),
  path.join(dir, '..', 'lib', 'node_modules', 'npm', 'bin', 'npx-cli.js'),
].find((f) => fs.existsSync(f));

const args = process.argv.slice(2);
const windows = process.platform === 'win32';
const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'];
const child = cli
  ? spawn(process.execPath, [cli, ...args], { stdio: 'inherit', windowsHide: true })
  : // The arguments are the plugin's own constants, safe for cmd.exe's parser.
    spawn(windows ? 'npx.cmd' : 'npx', args, { stdio: 'inherit', windowsHide: true, shell: windows });

for (const signal of SIGNALS) {
  process.on(signal, () => child.kill(signal));
}
child.on('error', (error) => {
  // stderr only: stdout belongs to the MCP server's JSON-RPC.
  process.stderr.write(`interlink-p2p plugin: cannot run npx: ${error.message}\n`);
  process.exit(1);
});
child.on('exit', (code, signal) => {
  if (signal) {
    // Die of the same signal, so the host sees what npx did.
    for (const s of SIGNALS) process.removeAllListeners(s);
    process.kill(process.pid, signal);
  } else {
    process.exit(code ?? 1);
  }
});
