// docs/PROTOCOL.md, written again from the document (not from the Rust code) on
// libraries this project did not write: @noble/* for Ed25519, SHA-256, HKDF and
// ChaCha20-Poly1305, @hpke/* for RFC 9180, cborg for strict CBOR decoding. The CBOR
// encoder is the few lines of §1 below, so encoding is checked byte for byte.
import { readFileSync } from 'node:fs'
import { ed25519, x25519 } from '@noble/curves/ed25519'
import { sha256 } from '@noble/hashes/sha2'
import { hkdf, extract as hkdfExtract, expand as hkdfExpand } from '@noble/hashes/hkdf'
import { hmac } from '@noble/hashes/hmac'
import { chacha20poly1305, xchacha20poly1305 } from '@noble/ciphers/chacha'
import { CipherSuite, HkdfSha256 } from '@hpke/core'
import { DhkemX25519HkdfSha256 } from '@hpke/dhkem-x25519'
import { Chacha20Poly1305 } from '@hpke/chacha20poly1305'
import { decode as cborgDecode } from 'cborg'

export class Mismatch extends Error {}
export const fail = (msg) => { throw new Mismatch(msg) }
export const ensure = (ok, msg) => { if (!ok) fail(msg) }

const te = new TextEncoder()
export const utf8 = (s) => te.encode(s)
export const hex = (b) => Buffer.from(b).toString('hex')
// RFC 4648 base32, unpadded, lower case (§4.10's invite code).
export const base32 = (bytes) => {
  const abc = 'abcdefghijklmnopqrstuvwxyz234567'
  let out = ''
  let bits = 0
  let acc = 0
  for (const b of bytes) {
    acc = (acc << 8) | b
    bits += 8
    while (bits >= 5) {
      out += abc[(acc >>> (bits - 5)) & 31]
      bits -= 5
    }
    acc &= (1 << bits) - 1
  }
  if (bits > 0) out += abc[(acc << (5 - bits)) & 31]
  return out
}
export const unhex = (s) => {
  ensure(/^([0-9a-f]{2})*$/.test(s), `not lowercase hex: ${s.slice(0, 40)}`)
  return new Uint8Array(Buffer.from(s, 'hex'))
}
export const concat = (...parts) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
  let i = 0
  for (const p of parts) { out.set(p, i); i += p.length }
  return out
}
export const equal = (a, b) => a.length === b.length && a.every((x, i) => x === b[i])
export const fill = (byte, n) => new Uint8Array(n).fill(byte)

// ---- the document itself: version (title line) and the ```vectors block ----

export function readSpec (path) {
  const text = readFileSync(path, 'utf8')
  const title = text.split('\n', 1)[0]
  const m = /^# .*\bversion (\d+)\s*$/.exec(title)
  ensure(m, `PROTOCOL.md: no "version N" in the title line: ${title}`)
  const block = /```vectors\n([\s\S]*?)```/.exec(text)
  ensure(block, 'PROTOCOL.md: no ```vectors block')
  const vectors = new Map()
  let name = null
  for (const line of block[1].split('\n')) {
    if (line.trim() === '') continue
    const head = /^(\S+) =$/.exec(line)
    if (head) {
      ensure(!vectors.has(head[1]), `vector ${head[1]} twice`)
      name = head[1]
      vectors.set(name, '')
    } else {
      ensure(name !== null && /^ {4}\S+$/.test(line), `vectors: unexpected line ${JSON.stringify(line)}`)
      vectors.set(name, vectors.get(name) + line.trim())
    }
  }
  return { version: Number(m[1]), vectors }
}

// ---- §1 CBOR: keys in table order, definite lengths, shortest integers, no floats ----

function head (major, n) {
  const m = major << 5
  if (typeof n === 'bigint' || n >= 2 ** 32) {
    const b = new Uint8Array(9); b[0] = m | 27
    new DataView(b.buffer).setBigUint64(1, BigInt(n))
    return b
  }
  if (n < 24) return Uint8Array.of(m | n)
  if (n < 0x100) return Uint8Array.of(m | 24, n)
  if (n < 0x10000) return Uint8Array.of(m | 25, n >> 8, n & 0xff)
  return Uint8Array.of(m | 26, n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff)
}

export class Float64 { constructor (value) { this.value = value } }

/** Encodes null, booleans, uint, Uint8Array (bytes), string (text), arrays, and plain
 * objects (maps with text keys, in insertion order = the field order of the tables). */
export function encode (v) {
  if (v === null) return Uint8Array.of(0xf6)
  if (v === false) return Uint8Array.of(0xf4)
  if (v === true) return Uint8Array.of(0xf5)
  if (v instanceof Float64) { // only for probing that decoders refuse floats (§1)
    const b = new Uint8Array(9); b[0] = 0xfb
    new DataView(b.buffer).setFloat64(1, v.value)
    return b
  }
  if (typeof v === 'number') {
    ensure(Number.isSafeInteger(v) && v >= 0, `encode: not a uint: ${v}`)
    return head(0, v)
  }
  if (typeof v === 'bigint') return head(0, v)
  if (v instanceof Uint8Array) return concat(head(2, v.length), v)
  if (typeof v === 'string') { const b = utf8(v); return concat(head(3, b.length), b) }
  if (Array.isArray(v)) return concat(head(4, v.length), ...v.map(encode))
  if (typeof v === 'object') {
    const keys = Object.keys(v)
    return concat(head(5, keys.length), ...keys.flatMap((k) => [encode(k), encode(v[k])]))
  }
  fail(`encode: unsupported value ${v}`)
}

/** Strict decode (cborg: no indefinite lengths, no undefined, no duplicate keys,
 * shortest forms), then the bytes must be exactly what §1's encoder emits for the value:
 * this also refuses floats, tags and any other form the document does not allow. */
export function decode (bytes, what) {
  let v
  try {
    v = cborgDecode(bytes, {
      strict: true,
      allowIndefinite: false,
      allowUndefined: false,
      allowInfinity: false,
      allowNaN: false,
      rejectDuplicateMapKeys: true,
      useMaps: false
    })
  } catch (e) { fail(`${what}: not strict CBOR: ${e.message}`) }
  ensure(equal(encode(v), bytes), `${what}: decodes, but is not in the form of §1 (re-encoded differs)`)
  return v
}

// ---- field checks: the tables of §3.1, §4 and §8, keys exactly and in order ----

// §8.2: a roster tag names one version of one session: SHA-256 over the domain, the
// identity key, the session id (length byte, then UTF-8), ts and seq (big-endian u64),
// cut to its first 8 bytes.
export const rosterTag = (identity, sessionId, ts, seq) => {
  const id = utf8(sessionId)
  const stamp = new Uint8Array(16)
  const view = new DataView(stamp.buffer)
  view.setBigUint64(0, BigInt(ts))
  view.setBigUint64(8, BigInt(seq))
  return sha256(concat(utf8('interlink-p2p/v7/roster-tag\0'), identity, Uint8Array.of(id.length), id, stamp)).slice(0, 8)
}

// §8.1 (version 8): a presence message's gossipsub id names its content.
export const gossipId = (data) => sha256(concat(utf8('interlink-p2p/v8/gossip-id\0'), data)).slice(0, 16)

// §8.2 (version 8): the roster digest, over every held tag in ascending byte order.
export const rosterDigest = (tags) => {
  const cmp = (a, b) => { for (let i = 0; i < 8; i++) if (a[i] !== b[i]) return a[i] - b[i]; return 0 }
  return sha256(concat(utf8('interlink-p2p/v8/roster-digest\0'), ...[...tags].sort(cmp))).slice(0, 16)
}

export const t = {
  uint: (v) => (Number.isSafeInteger(v) && v >= 0) || typeof v === 'bigint',
  bool: (v) => typeof v === 'boolean',
  text: (v) => typeof v === 'string',
  bytes: (v) => v instanceof Uint8Array,
  b: (n) => (v) => v instanceof Uint8Array && v.length === n,
  orNull: (f) => (v) => v === null || f(v),
  array: (f) => (v) => Array.isArray(v) && v.every(f),
  tuple: (...fs) => (v) => Array.isArray(v) && v.length === fs.length && fs.every((f, i) => f(v[i])),
  map: (fields) => (v) => { shape(v, fields, 'nested'); return true },
  oneOf: (...xs) => (v) => xs.includes(v)
}

/** `fields` is [[key, check, optional?], …] in table order. */
export function shape (v, fields, what) {
  ensure(v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Uint8Array),
    `${what}: not a map`)
  const want = fields.filter(([k, , opt]) => !opt || k in v).map(([k]) => k)
  const got = Object.keys(v)
  ensure(got.join() === want.join(), `${what}: keys ${JSON.stringify(got)}, the spec's table says ${JSON.stringify(want)}`)
  for (const [k, check] of fields) {
    if (k in v) {
      let ok
      try { ok = check(v[k]) } catch (e) { fail(`${what}.${k}: ${e.message}`) }
      ensure(ok, `${what}.${k}: wrong type or value: ${show(v[k])}`)
    }
  }
  return v
}
const show = (x) => x instanceof Uint8Array ? `bytes(${x.length}) ${hex(x).slice(0, 32)}` : JSON.stringify(x)

const noControl = (s) => !/[\u0000-\u001f\u007f-\u009f]/.test(s)
const textMax = (n) => (v) => typeof v === 'string' && utf8(v).length <= n && noControl(v)
const refusalCodes = ['malformed', 'too_large', 'bad_signature', 'unsupported_version', 'wrong_recipient',
  'stale', 'future_dated', 'replayed', 'not_paired', 'unsolicited_accept', 'store_failed',
  'mixed_senders', 'not_a_session', 'wrong_mailbox', 'over_budget', 'unopenable']

export function schemas (V) {
  const v = (x) => x === V
  const refusal = t.map([['code', t.oneOf(...refusalCodes)], ['detail', textMax(512)]])
  return {
    wrapper: [['body', t.bytes], ['sig', t.b(64)],
      ['reply_to', t.map([['key', t.b(32)], ['session', t.text]]), true]],
    announcement: [['v', v], ['identity', t.b(32)],
      ['sealing', t.map([['key', t.b(32)], ['sig', t.b(64)]])],
      ['session_id', sessionId], ['peer_id', t.bytes],
      ['addrs', (a) => t.array((s) => textMax(256)(s) && s.startsWith('/'))(a) && a.length <= 16],
      // §4.1 (since version 13): the details sealed for their readers.
      ['details', t.map([['nonce', t.b(24)],
        ['ct', (b) => b instanceof Uint8Array && b.length >= 16 && b.length <= 4608],
        ['readers', (a) => t.array(t.b(52))(a) && a.length <= 64]])],
      ['heartbeat_ms', t.uint],
      ['ts', t.uint], ['seq', t.uint]],
    details: [['cwd', textMax(1024)], ['git_label', t.orNull(textMax(256))], ['summary', textMax(512)],
      ['host', t.oneOf('claude', 'codex', 'other')], ['delivery', t.oneOf('inbox', 'channel', 'codex', 'host_inbox', 'poll')],
      // Since version 14: the project and the session's claims on its files (§4.1).
      ['project', t.orNull(t.b(16))],
      ['claims', (a) => t.array(t.map([['pattern', (s) => textMax(160)(s) && s.length >= 1],
        ['exclusive', t.bool], ['reason', textMax(80)], ['since', t.uint], ['until', t.uint]]))(a) && a.length <= 8]],
    goodbye: [['v', v], ['identity', t.b(32)], ['session_id', sessionId], ['ts', t.uint], ['seq', t.uint]],
    // §4.9: no signer in the body; it is the identity of the announcement `of` names.
    beacon: [['v', v], ['of', t.b(8)], ['heartbeat_ms', t.uint], ['ts', t.uint], ['seq', t.uint]],
    envelope: [['v', v], ['sender', t.b(32)], ['sender_session', sessionId], ['recipient', t.b(32)],
      ['recipient_session', sessionId], ['msg_id', t.b(16)], ['ts', t.uint],
      ['kind', t.oneOf('message', 'knock', 'pair_accept', 'goodbye', 'read', 'host_queued', 'pass')],
      ['in_reply_to', t.orNull(t.b(16))],
      // Since version 10, optional: a receipt's further messages (1 to 63, distinct).
      ['also_about', (a) => t.array(t.b(16))(a) && a.length >= 1 && a.length <= 63 &&
        new Set(a.map(hex)).size === a.length, true],
      ['name', t.orNull((s) => /^[A-Za-z0-9._-]{1,32}$/.test(s))],
      ['sealed', t.orNull(t.map([['enc', t.b(32)], ['ct', t.bytes]]))],
      ['pass', t.orNull(t.b(64))], ['reply_pass', t.orNull(t.b(64))]],
    sealedBody: [['text', (s) => typeof s === 'string' && utf8(s).length >= 1 && utf8(s).length <= 65536],
      ['task_id', t.orNull((s) => textMax(128)(s) && s.length >= 1)],
      ['status', t.orNull(t.oneOf('update', 'needs_input', 'result', 'failed', 'canceled'))],
      ['in_reply_to', t.orNull(t.b(16))],
      // Since version 7, optional: the group tag (§4.3), 1 to 32 distinct member sessions.
      ['group', t.map([['name', (s) => /^[A-Za-z0-9._-]{1,32}$/.test(s)], ['thread', t.b(16)],
        ['members', (a) => t.array(t.map([['key', t.b(32)], ['session', sessionId]]))(a) &&
          a.length >= 1 && a.length <= 32 &&
          new Set(a.map((m) => `${hex(m.key)}#${m.session}`)).size === a.length]]), true]],
    receipt: [['v', v], ['recipient', t.b(32)], ['recipient_session', sessionId], ['sender', t.b(32)],
      ['msg_ids', (a) => t.array(t.b(16))(a) && a.length >= 1 && a.length <= 64 &&
        new Set(a.map(hex)).size === a.length],
      ['state', t.oneOf('delivered')], ['ts', t.uint], ['pass', t.orNull(t.b(64))]],
    ack: [['v', v], ['owner', t.b(32)], ['owner_session', sessionId],
      ['entries', (a) => t.array(t.tuple(t.b(32), t.b(16)))(a) && a.length >= 1 && a.length <= 256],
      ['ts', t.uint]],
    rosterRequest: [['v', v], ['have', (b) => t.bytes(b) && b.length % 8 === 0 && b.length <= 8 * 16384],
      ['away', t.bytes], ['digest', t.orNull(t.b(16))]],
    rosterResponse: [['v', v], ['announcements', t.array(t.bytes)], ['beacons', t.array(t.bytes)], ['same', t.bool]],
    deliverRequest: [['v', v], ['envelopes', t.array(t.bytes)]],
    deliverResponse: [['v', v], ['receipt', t.orNull(t.bytes)],
      ['results', t.array(t.map([['refused', t.orNull(refusal)]]))]],
    receiptRequest: [['v', v], ['receipt', t.bytes]],
    mailboxFetch: [['v', v], ['owner', t.b(32)], ['owner_session', sessionId],
      ['holder', (b) => t.bytes(b) && b.length >= 1 && b.length <= 64], ['ts', t.uint]],
    mailboxFetchRequest: [['v', v], ['op', t.map([['fetch', t.map([['request', t.bytes]])]])]],
    // §8.8: the device link's request and response; the optional keys belong to one
    // step each (checked by deviceStep below).
    deviceRequest: [['v', v], ['step', t.oneOf(1, 2, 3)], ['commit', t.b(32), true], ['eph', t.b(32), true],
      ['addrs', (a) => t.array(textMax(256))(a) && a.length <= 8, true], ['mac', t.b(32)]],
    deviceResponse: [['v', v], ['step', t.oneOf(1, 2, 3)],
      ['status', t.oneOf('ok', 'refused', 'used', 'expired', 'declined')],
      ['eph', t.b(32), true], ['mac', t.b(32), true], ['enc', t.b(32), true],
      ['sealed', (b) => t.bytes(b) && b.length <= 3088, true]],
    deviceOffer: [['seed', t.b(32)], ['addrs', (a) => t.array(textMax(256))(a) && a.length <= 8]]
  }
}
const sessionId = (s) => typeof s === 'string' && /^[A-Za-z0-9._:-]{1,128}$/.test(s)

// ---- §2 keys, §3 signatures, §4.7 passes, §6 identifiers ----

export const TAG = Object.fromEntries(['announcement', 'goodbye', 'envelope', 'receipt', 'ack',
  'sealing-key', 'mailbox-pass', 'mailbox-fetch', 'beacon', 'invite', 'device-link'].map((d) => [d, utf8(`interlink-p2p/v1/${d}\0`)]))

export const H = (...parts) => sha256(concat(...parts))
export const identityKey = (seed) => ed25519.getPublicKey(seed)
export function fingerprint (key) {
  const h = hex(H(utf8('interlink-p2p/v1/fingerprint'), key).subarray(0, 6))
  return `${h.slice(0, 4)}-${h.slice(4, 8)}-${h.slice(8, 12)}`
}
export const transportSeed = (seed, session) =>
  hkdf(sha256, seed, utf8('interlink-p2p/v1/transport-key'), utf8(session), 32)
export const sealingIkm = (seed) => hkdf(sha256, seed, utf8('interlink-p2p/v1/sealing-key'), new Uint8Array(0), 32)
export const mailboxKey = (identity, session) => H(utf8('interlink-p2p/v1/mailbox'), identity, utf8(session))

export const sign = (domain, seed, payload) => ed25519.sign(concat(TAG[domain], payload), seed)
/** RFC 8032 verification with canonical S and encodings (zip215: false), and no
 * small-order public key or R (§3: ed25519-dalek's verify_strict). */
export function verify (domain, key, payload, sig) {
  // verify_strict also refuses a small-order R (the first half of the signature),
  // which §3 does not say.
  try {
    if (ed25519.ExtendedPoint.fromHex(key).isSmallOrder()) return false
    if (ed25519.ExtendedPoint.fromHex(sig.subarray(0, 32)).isSmallOrder()) return false
  } catch { return false }
  try { return ed25519.verify(sig, concat(TAG[domain], payload), key, { zip215: false }) } catch { return false }
}
export const pass = (ownerSeed, sender) => sign('mailbox-pass', ownerSeed, concat(identityKey(ownerSeed), sender))
export const passValid = (owner, sender, p) => verify('mailbox-pass', owner, concat(owner, sender), p)

/** A signed wrapper (§3.1) of `body` (already CBOR). */
export function wrap (domain, seed, body, replyTo) {
  const w = { body, sig: sign(domain, seed, body) }
  if (replyTo) w.reply_to = replyTo
  return encode(w)
}

// §4.10: an invite code is `interlink2` and the base32 of the signed wrapper and its
// 4-byte check.
export const inviteCheck = (wrapper) => sha256(concat(utf8('interlink-p2p/v1/invite-check\0'), wrapper)).slice(0, 4)
export const inviteCode = (seed, body) => {
  const w = wrap('invite', seed, body)
  return 'interlink2' + base32(concat(w, inviteCheck(w)))
}
export const unbase32 = (text) => {
  const abc = 'abcdefghijklmnopqrstuvwxyz234567'
  const out = []
  let bits = 0
  let acc = 0
  for (const c of text.toLowerCase()) {
    const v = abc.indexOf(c)
    ensure(v >= 0, `base32: ${c}`)
    acc = (acc << 5) | v
    bits += 5
    if (bits >= 8) { out.push((acc >>> (bits - 8)) & 255); bits -= 8; acc &= (1 << bits) - 1 }
  }
  return Uint8Array.from(out)
}
/** Reads a code as §4.10 says: prefix, check, wrapper, map, signature under `key`.
 * Returns the invite map; throws on any failure. */
export function readInvite (code) {
  ensure(code.startsWith('interlink2'), 'invite: prefix')
  const bytes = unbase32(code.slice('interlink2'.length))
  ensure(bytes.length > 4, 'invite: too short')
  const w = bytes.subarray(0, bytes.length - 4)
  ensure(equal(bytes.subarray(bytes.length - 4), inviteCheck(w)), 'invite: check')
  const wrapper = decode(w, 'invite wrapper')
  ensure(Object.keys(wrapper).join() === 'body,sig', 'invite: wrapper keys')
  const body = decode(wrapper.body, 'invite body')
  ensure(Object.keys(body).join() === 'v,key,name,session,secret,expires,relays,addrs' && body.v === 2, 'invite: map')
  ensure(verify('invite', body.key, wrapper.body, wrapper.sig), 'invite: signature')
  return body
}

// §4.11: a device code is framed as an invite code, format 3, signed in the
// `device-link` domain.
export const deviceCode = (seed, body) => {
  const w = wrap('device-link', seed, body)
  return 'interlink3' + base32(concat(w, inviteCheck(w)))
}
/** Reads a device code as §4.11 says: prefix, check, wrapper, map and its rules, the
 * signature under `key`. Returns the code's map; throws on any failure. */
export function readDeviceCode (code) {
  ensure(code.startsWith('interlink3'), 'device code: prefix')
  ensure(code.length <= 2048, 'device code: too long')
  const bytes = unbase32(code.slice('interlink3'.length))
  ensure(bytes.length > 4, 'device code: too short')
  const w = bytes.subarray(0, bytes.length - 4)
  ensure(equal(bytes.subarray(bytes.length - 4), inviteCheck(w)), 'device code: check')
  const wrapper = decode(w, 'device code wrapper')
  ensure(Object.keys(wrapper).join() === 'body,sig' && t.b(64)(wrapper.sig), 'device code: wrapper')
  const body = shape(decode(wrapper.body, 'device code body'), [['v', (x) => x === 3], ['key', t.b(32)],
    ['secret', t.b(16)], ['expires', t.uint],
    ['addrs', (a) => t.array((m) => t.bytes(m) && m.length >= 1 && m.length <= 160)(a) && a.length >= 1 && a.length <= 6]],
  'device code body')
  ensure(verify('device-link', body.key, wrapper.body, wrapper.sig), 'device code: signature')
  return body
}

// §8.8: the device link's keys, MACs, commitment and comparison string.
const DL = utf8('interlink-p2p/v1/device-link')
export function deviceKeys (secret, key) {
  const prk = hkdfExtract(sha256, secret, DL)
  return {
    mac: hkdfExpand(sha256, prk, concat(utf8('mac'), key), 32),
    psk: hkdfExpand(sha256, prk, concat(utf8('psk'), key), 32)
  }
}
export const deviceMac = (kMac, label, ...parts) => hmac(sha256, kMac, concat(utf8(`${label}\0`), ...parts))
export const deviceCommit = (eJ) => H(utf8('interlink-p2p/v1/device-link-commit\0'), eJ)
/** The addresses of a `confirm`, as its MAC covers them: each a 2-byte big-endian
 * length and its UTF-8. */
export const deviceAddrs = (addrs) => concat(...addrs.map((a) => {
  const b = utf8(a)
  return concat(Uint8Array.of(b.length >> 8, b.length & 255), b)
}))
export function deviceComparison (kMac, C, eI, eJ) {
  const m = deviceMac(kMac, 'compare', C, eI, eJ)
  const n = (((m[0] << 24) >>> 0) + (m[1] << 16) + (m[2] << 8) + m[3]) % 1000000
  const d = String(n).padStart(6, '0')
  return `${d.slice(0, 3)}-${d.slice(3)}`
}
/** Which optional keys a device-link message carries, by step (and status). */
export function deviceStep (msg, what) {
  const optional = ['commit', 'eph', 'addrs', 'enc', 'sealed'].concat('status' in msg ? ['mac'] : [])
  const want = !('status' in msg)
    ? { 1: ['commit'], 2: ['eph'], 3: ['addrs'] }[msg.step]
    : msg.status !== 'ok' ? [] : { 1: ['eph', 'mac'], 2: [], 3: ['enc', 'sealed'] }[msg.step]
  const got = optional.filter((k) => k in msg)
  ensure(got.join() === want.join(), `${what}: step ${msg.step} carries ${JSON.stringify(got)}, §8.8 says ${JSON.stringify(want)}`)
  return msg
}
/** An ephemeral X25519 key pair of the exchange: DeriveKeyPair(ikm). */
export async function deviceEphemeral (ikm) {
  const kp = await suite.kem.deriveKeyPair(ab(ikm))
  return { kp, pub: new Uint8Array(await suite.kem.serializePublicKey(kp.publicKey)) }
}
/** The offer's seal (§8.8): HPKE auth-PSK, single-shot, to `eJ` from `(skI, eI)`. */
export async function deviceSeal (eJ, senderKp, kPsk, aad, offer, ekm) {
  const ctx = await suite.createSenderContext({
    recipientPublicKey: await suite.kem.deserializePublicKey(ab(eJ)),
    senderKey: senderKp,
    psk: { id: ab(DL), key: ab(kPsk) },
    info: ab(DL),
    ekm: ab(ekm)
  })
  return { enc: new Uint8Array(ctx.enc), sealed: new Uint8Array(await ctx.seal(ab(offer), ab(aad))) }
}
export async function deviceOpen (recipientKp, senderPub, kPsk, aad, enc, sealed) {
  const ctx = await suite.createRecipientContext({
    recipientKey: recipientKp,
    senderPublicKey: await suite.kem.deserializePublicKey(ab(senderPub)),
    psk: { id: ab(DL), key: ab(kPsk) },
    info: ab(DL),
    enc: ab(enc)
  })
  return new Uint8Array(await ctx.open(ab(sealed), ab(aad)))
}

/** Decodes a wrapper and its body, checks both tables, then the signature under the
 * signer named inside (`signerField`). Returns { wrapper, body }. */
export function openSigned (bytes, domain, schema, signerField, S, what) {
  const wrapper = shape(decode(bytes, what), S.wrapper, what)
  if (domain !== 'envelope') ensure(!('reply_to' in wrapper), `${what}: reply_to is for envelopes only`)
  const body = shape(decode(wrapper.body, `${what}.body`), schema, `${what}.body`)
  ensure(verify(domain, body[signerField], wrapper.body, wrapper.sig),
    `${what}: signature does not verify under ${signerField} in the ${domain} domain`)
  return { wrapper, body }
}

/** §4.9: a beacon's wrapper and body, its signature checked under `signer` (the
 * identity of the announcement its `of` names). Returns { wrapper, body }. */
export function openBeacon (bytes, signer, S, what) {
  const wrapper = shape(decode(bytes, what), S.wrapper, what)
  ensure(!('reply_to' in wrapper), `${what}: reply_to is for envelopes only`)
  const body = shape(decode(wrapper.body, `${what}.body`), S.beacon, `${what}.body`)
  ensure(verify('beacon', signer, wrapper.body, wrapper.sig), `${what}: signature does not verify under the announcement's identity`)
  return { wrapper, body }
}

// ---- §5 sealing ----

const suite = new CipherSuite({ kem: new DhkemX25519HkdfSha256(), kdf: new HkdfSha256(), aead: new Chacha20Poly1305() })
const INFO = utf8('interlink-p2p/v2/seal')
const EXPORT = utf8('interlink-p2p/v2/body-key')
const ab = (u8) => u8.slice().buffer

export async function sealingKeyPair (seed) {
  const kp = await suite.kem.deriveKeyPair(ab(sealingIkm(seed)))
  const pub = new Uint8Array(await suite.kem.serializePublicKey(kp.publicKey))
  return { kp, pub }
}
export const sealingBinding = (seed, sealingPub) =>
  ({ key: sealingPub, sig: sign('sealing-key', seed, concat(identityKey(seed), sealingPub)) })

/** Seals `plaintext` to `recipientPub`; `random(n)` gives ikmE (32) then the nonce (12). */
export async function seal (recipientPub, plaintext, aad, random) {
  const ctx = await suite.createSenderContext({
    recipientPublicKey: await suite.kem.deserializePublicKey(ab(recipientPub)),
    info: ab(INFO),
    ekm: ab(random(32))
  })
  const K = new Uint8Array(await ctx.export(ab(EXPORT), 32))
  const nonce = random(12)
  return { enc: new Uint8Array(ctx.enc), ct: concat(nonce, chacha20poly1305(K, nonce, aad).encrypt(plaintext)) }
}
export async function open (recipientKp, sealed, aad) {
  const ctx = await suite.createRecipientContext({ recipientKey: recipientKp, enc: ab(sealed.enc), info: ab(INFO) })
  const K = new Uint8Array(await ctx.export(ab(EXPORT), 32))
  return chacha20poly1305(K, sealed.ct.subarray(0, 12), aad).decrypt(sealed.ct.subarray(12))
}
export const sealAad = (msgId, sender, recipient) => concat(msgId, sender, recipient)

// §4.1 "Details": the content key wrapped per reader under HKDF(X25519(sealing keys)).
const sealingSecretBytes = async (seed) =>
  new Uint8Array(await suite.kem.serializePrivateKey((await sealingKeyPair(seed)).kp.privateKey))
/** The wrap key and hint `announcer` uses for `reader`, from one side's seed and the other's sealing key. */
export async function readerKey (mySeed, otherSealingPub, announcer, reader) {
  const shared = x25519.getSharedSecret(await sealingSecretBytes(mySeed), otherSealingPub)
  ensure(!shared.every((b) => b === 0), 'an all-zero X25519 agreement')
  const okm = hkdf(sha256, shared, utf8('interlink-p2p/v1/presence-reader'), concat(announcer, reader), 36)
  return { key: okm.slice(0, 32), hint: okm.slice(32) }
}
const detailsAad = (announcer, session) => concat(announcer, utf8(session))
/** Seals `details` (a plain object of §4.1's details map) of `seed`'s `session` for itself and
 * `others` ([{ identity, sealing }]); `random(n)` gives the nonce (24), then the content key (32). */
export async function sealDetails (seed, session, details, others, random) {
  const me = identityKey(seed)
  const nonce = random(24)
  const ck = random(32)
  const aad = detailsAad(me, session)
  const ct = xchacha20poly1305(ck, nonce, aad).encrypt(encode(details))
  const mine = (await sealingKeyPair(seed)).pub
  const readers = []
  for (const r of [{ identity: me, sealing: mine }, ...others.filter((o) => !equal(o.identity, me))]) {
    const w = await readerKey(seed, r.sealing, me, r.identity)
    readers.push(concat(w.hint, xchacha20poly1305(w.key, nonce, aad).encrypt(ck)))
  }
  readers.sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
  return { nonce, ct, readers }
}
/** Opens an announcement body's details as `readerSeed`; null when none is sealed for it. */
export async function openDetails (readerSeed, ann, S) {
  const w = await readerKey(readerSeed, ann.sealing.key, ann.identity, identityKey(readerSeed))
  const aad = detailsAad(ann.identity, ann.session_id)
  for (const entry of ann.details.readers) {
    if (!equal(entry.subarray(0, 4), w.hint)) continue
    let ck
    try { ck = xchacha20poly1305(w.key, ann.details.nonce, aad).decrypt(entry.subarray(4)) } catch { continue }
    const plain = xchacha20poly1305(ck, ann.details.nonce, aad).decrypt(ann.details.ct)
    return { plain, details: shape(decode(plain, 'details'), S.details, 'details') }
  }
  return null
}
