#!/usr/bin/env node
// Packs the npm distribution: the launcher package `interlink-p2p` and one package per
// platform binary given, as `npm pack` tarballs in --out.
//
//   node dist/npm-pack.mjs --version 0.1.0 --out DIR --binary linux-x64=PATH [--binary ...]
//
// Platform names are npm's `<process.platform>-<process.arch>`; each platform package
// is `@interlink-p2p/<name>` with `os`/`cpu` (and `libc` on Linux) set, so npm installs
// only the one that runs on the machine. The launcher lists all of them in
// optionalDependencies at exactly --version. Prints the tarballs' paths, one a line.
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const SCOPE = '@interlink-p2p';
// npm platform name -> [os, cpu, libc or null, executable name].
export const PLATFORMS = {
  'linux-x64': ['linux', 'x64', 'glibc', 'interlink-p2p'],
  'linux-arm64': ['linux', 'arm64', 'glibc', 'interlink-p2p'],
  'darwin-x64': ['darwin', 'x64', null, 'interlink-p2p'],
  'darwin-arm64': ['darwin', 'arm64', null, 'interlink-p2p'],
  'win32-x64': ['win32', 'x64', null, 'interlink-p2p.exe'],
};

function usage(message) {
  process.stderr.write(`npm-pack: ${message}\n` +
    'usage: node dist/npm-pack.mjs --version V --out DIR [--binary PLATFORM=PATH]...\n' +
    `platforms: ${Object.keys(PLATFORMS).join(', ')}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const args = { binaries: [] };
  for (let i = 0; i < argv.length; i++) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) usage(`${flag} needs a value`);
    i++;
    if (flag === '--version') args.version = value;
    else if (flag === '--out') args.out = resolve(value);
    else if (flag === '--binary') {
      const at = value.indexOf('=');
      const [platform, path] = [value.slice(0, at), value.slice(at + 1)];
      if (at < 0 || !PLATFORMS[platform]) usage(`--binary ${value}: not PLATFORM=PATH with a known platform`);
      args.binaries.push([platform, resolve(path)]);
    } else usage(`unknown argument ${flag}`);
  }
  if (!/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/.test(args.version ?? '')) usage('--version X.Y.Z is required');
  if (!args.out) usage('--out is required');
  return args;
}

function pack(dir, out) {
  const json = execFileSync('npm', ['pack', '--json', '--pack-destination', out], {
    cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'],
  });
  return join(out, JSON.parse(json)[0].filename);
}

// The launcher's package.json and script must name exactly the platform packages built
// here: a platform missing from either would install and then find no binary.
function checkLauncher(manifest, script) {
  const wanted = Object.keys(PLATFORMS).map((p) => `${SCOPE}/${p}`).sort();
  const listed = Object.keys(manifest.optionalDependencies ?? {}).sort();
  if (JSON.stringify(wanted) !== JSON.stringify(listed)) {
    usage(`the launcher's optionalDependencies (${listed}) are not the platform packages (${wanted})`);
  }
  for (const name of wanted) {
    if (!script.includes(`'${name}'`)) usage(`the launcher script does not name ${name}`);
  }
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  mkdirSync(args.out, { recursive: true });
  const stage = mkdtempSync(join(tmpdir(), 'interlink-npm-'));
  try {
    const launcher = JSON.parse(readFileSync(join(here, 'npm/interlink-p2p/package.json'), 'utf8'));
    checkLauncher(launcher, readFileSync(join(here, 'npm/interlink-p2p/bin/interlink-p2p.js'), 'utf8'));
    const tarballs = [];
    for (const [platform, binary] of args.binaries) {
      const [os, cpu, libc, exe] = PLATFORMS[platform];
      const dir = join(stage, platform);
      mkdirSync(join(dir, 'bin'), { recursive: true });
      copyFileSync(binary, join(dir, 'bin', exe));
      chmodSync(join(dir, 'bin', exe), 0o755);
      const manifest = {
        name: `${SCOPE}/${platform}`,
        version: args.version,
        description: `The interlink-p2p binary for ${os} ${cpu}; installed by the interlink-p2p package.`,
        license: launcher.license,
        repository: launcher.repository,
        os: [os],
        cpu: [cpu],
        ...(libc ? { libc: [libc] } : {}),
        files: ['bin'],
        preferUnplugged: true,
      };
      writeFileSync(join(dir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
      writeFileSync(join(dir, 'README.md'),
        `# ${manifest.name}\n\n${manifest.description} Install \`interlink-p2p\`, not this package.\n`);
      tarballs.push(pack(dir, args.out));
    }
    const dir = join(stage, 'interlink-p2p');
    cpSync(join(here, 'npm/interlink-p2p'), dir, { recursive: true });
    launcher.version = args.version;
    for (const name of Object.keys(launcher.optionalDependencies)) {
      launcher.optionalDependencies[name] = args.version;
    }
    writeFileSync(join(dir, 'package.json'), `${JSON.stringify(launcher, null, 2)}\n`);
    tarballs.push(pack(dir, args.out));
    process.stdout.write(`${tarballs.join('\n')}\n`);
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

main();
