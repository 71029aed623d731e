#!/usr/bin/env node
// The plugin's launcher: runs the interlink-p2p that is already on this machine, else
// the npm package through npx, with this process's arguments, stdio and exit status.
// When none can run it says why within LOOK_BUDGET_MS: for `mcp`, as the error answer
// to the host's requests (Claude Code shows it beside the failed server in `claude mcp
// list`, Codex as the server's startup error), and always on stderr.
//
// Where it looks, in order, taking the first whose `--version` is compatible:
//   1. INTERLINK_P2P_BINARY, when set;
//   2. the copy `interlink-p2p install` keeps: $XDG_DATA_HOME/interlink-p2p/bin (else
//      ~/.local/share/interlink-p2p/bin; %LOCALAPPDATA%\interlink-p2p\bin on Windows);
//   3. every interlink-p2p on PATH (cargo install, npm install -g);
//   4. npx interlink-p2p@<this plugin's version>, once `npx … --version` answered.
// Compatible means Cargo's and npm's caret rule against the plugin's version: the same
// major version (the same minor while the major is 0), and not older. An older binary
// may lack a tool or an argument the plugin's hooks use.
//
// Why `node` runs this and not a shell script or npx: node is an executable on every
// platform, where a host that spawns its command directly cannot start npx's .cmd on
// Windows (anthropics/claude-code#58510). Nothing but the server may write to stdout.
'use strict';

const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const ROOT = path.join(__dirname, '..');
const WINDOWS = process.platform === 'win32';
const EXE = WINDOWS ? 'interlink-p2p.exe' : 'interlink-p2p';
/** Everything before the binary runs (or the failure is told) fits in this. */
const LOOK_BUDGET_MS = 4500;
/** Longest one `--version` of a binary on this machine may take. */
const VERSION_TIMEOUT_MS = 2000;
/** PATH entries looked at; a longer PATH is cut. */
const MAX_PATH_DIRS = 128;
/** Longest request line read while telling the failure; longer ones are skipped. */
const MAX_LINE_BYTES = 1 << 20;
const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'];

const started = Date.now();
const args = process.argv.slice(2);

function pluginVersion() {
  const manifest = path.join(ROOT, '.claude-plugin', 'plugin.json');
  try {
    return JSON.parse(fs.readFileSync(manifest, 'utf8')).version;
  } catch (error) {
    return undefined;
  }
}

function parseVersion(text) {
  const m = /^(\d+)\.(\d+)\.(\d+)/.exec(text || '');
  return m ? m.slice(1, 4).map(Number) : undefined;
}

/** Whether `have` satisfies `^want` (both [major, minor, patch]). */
function compatible(have, want) {
  const range = want[0] > 0 ? 1 : want[1] > 0 ? 2 : 3;
  for (let i = 0; i < range; i++) if (have[i] !== want[i]) return false;
  for (let i = range; i < 3; i++) {
    if (have[i] !== want[i]) return have[i] > want[i];
  }
  return true;
}

function remaining() {
  return LOOK_BUDGET_MS - (Date.now() - started);
}

/** Runs `command --version`; returns the version it printed, or why not. */
function versionOf(command, prefix, timeout, shell = false) {
  const run = spawnSync(command, [...prefix, '--version'], {
    shell,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: Math.max(1, timeout),
    windowsHide: true,
    maxBuffer: 1 << 16,
  });
  if (run.error) {
    const why = run.error.code === 'ETIMEDOUT' ? `no answer within ${timeout} ms` : run.error.message;
    return { why: `cannot run it: ${why}` };
  }
  const out = /interlink-p2p (\S+)/.exec(run.stdout || '');
  if (run.status !== 0 || !out) {
    const said = reasonIn(run.stderr) || reasonIn(run.stdout) || `exit status ${run.status}`;
    return { why: `\`--version\` failed: ${said}` };
  }
  return { version: out[1] };
}

/** What `text` says went wrong: npm's first error lines, else its last line. */
function reasonIn(text) {
  const lines = (text || '').split(/\r?\n/).map((l) => l.trim()).filter(Boolean);
  const npm = lines
    .filter((l) => /^npm (ERR!|error) /.test(l))
    .map((l) => l.replace(/^npm (ERR!|error) /, '').trim())
    .filter((l) => !/^(syscall|errno|at |A complete log|Log files)/.test(l));
  const said = npm.length ? npm.slice(0, 3).join('; ') : lines[lines.length - 1] || '';
  return said.slice(0, 300);
}

function isFile(file) {
  try {
    const st = fs.statSync(file);
    return st.isFile() && (WINDOWS || (st.mode & 0o111) !== 0);
  } catch {
    return false;
  }
}

function installedCopy() {
  const env = process.env;
  const data = WINDOWS ? env.LOCALAPPDATA : env.XDG_DATA_HOME;
  const home = env.HOME || (WINDOWS ? env.USERPROFILE : undefined) || os.homedir();
  const base = data && data.trim() ? data : path.join(home, '.local', 'share');
  return path.join(base, 'interlink-p2p', 'bin', EXE);
}

function onPath() {
  const dirs = (process.env.PATH || '').split(path.delimiter).filter(Boolean);
  return dirs.slice(0, MAX_PATH_DIRS).map((dir) => path.join(dir, EXE));
}

/** The npx of the npm that came with this node, run through this node. */
function npxCli() {
  const dir = path.dirname(process.execPath);
  return [
    path.join(dir, 'node_modules', 'npm', 'bin', 'npx-cli.js'),
    path.join(dir, '..', 'lib', 'node_modules', 'npm', 'bin', 'npx-cli.js'),
  ].find((f) => fs.existsSync(f));
}

/** What to run: { command, prefix, shell } or { tried: [reasons] }. */
function find(version) {
  const want = parseVersion(version);
  const tried = [];
  const seen = new Set();
  const candidates = [];
  if (process.env.INTERLINK_P2P_BINARY) {
    candidates.push(['INTERLINK_P2P_BINARY', process.env.INTERLINK_P2P_BINARY]);
  }
  candidates.push(['the copy `interlink-p2p install` keeps', installedCopy()]);
  for (const file of onPath()) candidates.push(['PATH', file]);
  let onPathSeen = false;
  for (const [where, file] of candidates) {
    if (where === 'PATH' && !isFile(file)) continue;
    if (where === 'PATH') onPathSeen = true;
    let real;
    try {
      real = fs.realpathSync(file);
    } catch {
      tried.push(`${file} (${where}): not there`);
      continue;
    }
    if (seen.has(real)) continue;
    seen.add(real);
    if (remaining() <= 0) {
      tried.push(`${file}: not checked, out of time`);
      continue;
    }
    const got = versionOf(file, [], Math.min(VERSION_TIMEOUT_MS, remaining()));
    if (got.version === undefined) {
      tried.push(`${file}: ${got.why}`);
      continue;
    }
    const have = parseVersion(got.version);
    if (!have || !compatible(have, want)) {
      tried.push(`${file}: version ${got.version}, the plugin needs ^${version}`);
      continue;
    }
    return { command: file, prefix: [] };
  }
  if (!onPathSeen) tried.push('PATH: no interlink-p2p');

  // One try, no retries: offline, npm's own retries take over a minute to fail.
  const npxArgs = ['--prefer-offline', '--fetch-retries=0', '-y', `interlink-p2p@${version}`];
  const cli = npxCli();
  // Where npm is not beside node (a version manager's shim), npx on PATH; on Windows
  // that is a .cmd, which only a shell starts (the arguments are this file's own).
  const [command, prefix, shell] = cli
    ? [process.execPath, [cli, ...npxArgs], false]
    : [WINDOWS ? 'npx.cmd' : 'npx', npxArgs, WINDOWS];
  const budget = remaining();
  const got = budget > 0 ? versionOf(command, prefix, budget, shell) : { why: 'out of time' };
  if (got.version === undefined) {
    tried.push(`npx interlink-p2p@${version}: ${got.why}`);
    return { tried };
  }
  return { command, prefix, shell };
}

// The commands come first: Claude Code cuts the reason it shows in `claude mcp list`.
function explain(version, tried) {
  return (
    `interlink-p2p plugin ${version} found no interlink-p2p to run. Run ` +
    '`cargo install --locked --path crates/interlink-p2p` in a checkout of interlink-p2p ' +
    `(or \`npm install -g interlink-p2p@${version}\` where that release is published), then ` +
    `restart the session. Tried: ${tried.join('; ')}.`
  );
}

/** Answers every request on stdin with `message` until the host closes it. */
function answerWithError(message) {
  let buffered = Buffer.alloc(0);
  let skipping = false;
  const answer = (line) => {
    let request;
    try {
      request = JSON.parse(line);
    } catch {
      return;
    }
    if (request === null || typeof request !== 'object' || request.id === undefined) return;
    if (typeof request.method !== 'string') return;
    const reply = { jsonrpc: '2.0', id: request.id, error: { code: -32000, message } };
    process.stdout.write(`${JSON.stringify(reply)}\n`);
  };
  process.stdin.on('data', (chunk) => {
    buffered = Buffer.concat([buffered, chunk]);
    let nl;
    while ((nl = buffered.indexOf(10)) >= 0) {
      const line = buffered.subarray(0, nl);
      buffered = buffered.subarray(nl + 1);
      if (!skipping) answer(line.toString('utf8'));
      skipping = false;
    }
    if (buffered.length > MAX_LINE_BYTES) {
      buffered = Buffer.alloc(0);
      skipping = true;
    }
  });
  process.stdin.on('end', () => process.exit(1));
  process.stdin.on('error', () => process.exit(1));
}

function run(command, prefix, shell) {
  const child = spawn(command, [...prefix, ...args], { shell, stdio: 'inherit', windowsHide: true });
  for (const signal of SIGNALS) {
    process.on(signal, () => child.kill(signal));
  }
  child.on('error', (error) => {
    process.stderr.write(`interlink-p2p plugin: cannot run ${command}: ${error.message}\n`);
    process.exit(1);
  });
  child.on('exit', (code, signal) => {
    if (signal) {
      // Die of the same signal, so the host sees what the binary did.
      for (const s of SIGNALS) process.removeAllListeners(s);
      process.kill(process.pid, signal);
    } else {
      process.exit(code ?? 1);
    }
  });
}

function main() {
  const version = pluginVersion();
  const found = version && parseVersion(version)
    ? find(version)
    : { tried: [`the plugin's version in ${path.join(ROOT, '.claude-plugin', 'plugin.json')}`] };
  if (found.command) {
    run(found.command, found.prefix, found.shell === true);
    return;
  }
  const message = explain(version, found.tried);
  process.stderr.write(`${message}\n`);
  if (args[0] === 'mcp') {
    answerWithError(message);
  } else {
    // A hook (`wait`): the server's failure already tells the user; a failing hook
    // at every turn would only repeat it.
    process.exit(0);
  }
}

main();
