// Conformance probe for docs/PROTOCOL.md: a js-libp2p peer (not rust-libp2p) that
// re-checks the test vectors, then talks to a real interlink-p2p session.
//
//   node probe.mjs vectors
//   node probe.mjs keygen                      -> {"seed", "identity_key", "fingerprint"}
//   node probe.mjs live --seed HEX --addr MULTIADDR/p2p/ID --identity HEX
//                       --session ID [--network NAME] [--text TEXT] [--me SESSION]
//                       [--gossip-wait MS]
//
// `live` checks the vectors, dials the session (TCP, Noise, Yamux, identify), sends it
// the largest roster request §8.2 allows (answered) and one tag more (the empty
// response), fetches its roster and verifies its announcement (and the beacon it gossips on the presence
// topic, unsigned by gossipsub, signed by its identity), answers its roster fetch with an
// announcement of its own, takes the session's `pass` envelope, delivers one sealed
// `message` and verifies the signed receipt, then checks refusals: a request of another
// version, one with no envelopes, envelopes with an unknown key, a float `ts` or a
// body sealed for another envelope, and a receipt with `also_about: []`. Progress goes to stderr; the last stdout line is
// `delivered <msg_id hex>`. Any mismatch exits 1 with the reason.
import './node20.mjs'
import { fileURLToPath } from 'node:url'
import { randomBytes } from 'node:crypto'
import { createLibp2p } from 'libp2p'
import { tcp } from '@libp2p/tcp'
import { noise } from '@chainsafe/libp2p-noise'
import { yamux } from '@chainsafe/libp2p-yamux'
import { identify } from '@libp2p/identify'
import { gossipsub } from '@chainsafe/libp2p-gossipsub'
import { generateKeyPairFromSeed } from '@libp2p/crypto/keys'
import { multiaddr } from '@multiformats/multiaddr'
import * as S from './spec.mjs'
import { checkVectors } from './vectors.mjs'

const { ensure, fail, hex, unhex, encode, decode, shape, equal } = S
const started = Date.now()
const log = (msg) => process.stderr.write(`js-probe +${Date.now() - started}ms: ${msg}\n`)
const SKEW = 2 * 60 * 1000 // §7: future clock skew tolerated

function args (argv) {
  const out = {}
  for (let i = 0; i < argv.length; i += 2) {
    ensure(argv[i].startsWith('--') && argv[i + 1] !== undefined, `bad argument ${argv[i]}`)
    out[argv[i].slice(2)] = argv[i + 1]
  }
  return out
}

async function readAll (stream, limit, what) {
  const parts = []
  let n = 0
  for await (const chunk of stream.source) {
    const b = chunk.subarray()
    n += b.length
    ensure(n <= limit, `${what}: more than ${limit} bytes`)
    parts.push(b)
  }
  return S.concat(...parts)
}

/** §8 request-response framing: one stream, one raw CBOR value each way, the
 * requester half-closes and reads the answer to the end of the stream. */
async function request (node, peer, protocol, bytes, limit) {
  const stream = await node.dialProtocol(peer, protocol, { signal: AbortSignal.timeout(10_000) })
  await stream.sink([bytes])
  const answer = await readAll(stream, limit, protocol)
  await stream.close().catch(() => {})
  return answer
}

async function live (spec, a) {
  const V = spec.version
  const sch = S.schemas(V)
  const network = a.network ?? 'default'
  const proto = (name) => `/interlink-p2p/${network}/${name}/${V}`
  const mySession = a.me ?? 'js-probe'
  const seed = unhex(a.seed)
  const me = S.identityKey(seed)
  const them = unhex(a.identity)
  const theirSession = a.session
  const target = multiaddr(a.addr)
  ensure(target.getPeerId(), '--addr must end in /p2p/<peer id>')

  // §2.2: the transport key of this session.
  const privateKey = await generateKeyPairFromSeed('Ed25519', S.transportSeed(seed, mySession))
  const node = await createLibp2p({
    privateKey,
    addresses: { listen: ['/ip4/127.0.0.1/tcp/0'] },
    transports: [tcp()],
    connectionEncrypters: [noise()],
    streamMuxers: [yamux()],
    services: {
      identify: identify({ agentVersion: 'interlink-js-probe/0' }),
      // §8.1 (version 8): no gossipsub signatures; the message id names the content.
      // This probe only listens.
      pubsub: gossipsub({ globalSignaturePolicy: 'StrictNoSign', emitSelf: false, msgIdFn: (m) => S.gossipId(m.data) })
    },
    start: false
  })
  // §8 "Connections": identify must carry `interlink-p2p/1/<network>`. js-libp2p derives
  // the protocol version from its protocol prefix (`<prefix>/0.1.0`) and has no option
  // for it, so it is set on the service before it starts.
  node.services.identify.host.protocolVersion = `interlink-p2p/1/${network}`

  const seen = { roster: null, pass: null, identify: null, gossip: null }
  const waiters = []
  const notify = () => waiters.splice(0).forEach((w) => w())
  const until = async (cond, ms, what) => {
    const end = Date.now() + ms
    while (!cond()) {
      ensure(Date.now() < end, `timed out after ${ms} ms waiting for ${what}`)
      await new Promise((resolve) => { waiters.push(resolve); setTimeout(resolve, 100) })
    }
  }
  node.addEventListener('peer:identify', (e) => { seen.identify = e.detail; notify() })

  // §8.1: the presence topic, unsigned by gossipsub (version 8); every payload is signed
  // by its session. A beacon is kept to be checked once the session's announcement is
  // known (its signer is that announcement's identity, §4.9).
  const topic = `interlink-p2p/v${V}/${network}/announce`
  const beacons = []
  node.services.pubsub.addEventListener('message', (e) => {
    const m = e.detail
    if (m.topic !== topic || seen.gossip instanceof Error) return
    try {
      ensure(m.type === 'unsigned', 'presence message signed by gossipsub (§8.1: StrictNoSign since version 8)')
      ensure(m.data.length <= 8256, `presence message of ${m.data.length} bytes`)
      const msg = decode(m.data, 'presence message')
      const keys = Object.keys(msg)
      ensure(keys.length === 1 && ['announcement', 'beacon', 'goodbye'].includes(keys[0]) && msg[keys[0]] instanceof Uint8Array,
        `presence message: keys ${keys}, §8.1 says exactly one of announcement, beacon, goodbye (bytes)`)
      if (keys[0] === 'announcement') {
        const { body } = S.openSigned(msg.announcement, 'announcement', sch.announcement, 'identity', sch, 'gossiped announcement')
        if (equal(body.identity, them) && body.session_id === theirSession) seen.gossip = { announcement: body }
      } else if (keys[0] === 'beacon') {
        beacons.push(msg.beacon)
      } else {
        S.openSigned(msg.goodbye, 'goodbye', sch.goodbye, 'identity', sch, 'gossiped goodbye')
      }
    } catch (err) { seen.gossip = err }
    notify()
  })

  const sealing = await S.sealingKeyPair(seed)
  const myPassForThem = S.pass(seed, them)

  // §8.2 responder: our own announcement, so the session can put this probe on its roster.
  await node.handle(proto('roster'), async ({ stream }) => {
    try {
      const req = await readAll(stream, 8 * 16384 + 16384 / 8 + 96, 'roster request')
      const { have, away, digest } = shape(decode(req, 'roster request'), sch.rosterRequest, 'roster request')
      ensure(away.length === 0 || away.length === Math.ceil(have.length / 64), 'roster request: away bitmap length')
      const addrs = node.getMultiaddrs().map((m) => m.decapsulateCode(421).toString())
      const ts = Date.now()
      const body = encode({
        v: V,
        identity: me,
        sealing: S.sealingBinding(seed, sealing.pub),
        session_id: mySession,
        peer_id: node.peerId.toMultihash().bytes,
        addrs,
        // §4.1 details, sealed for this probe's own identity alone.
        details: await S.sealDetails(seed, mySession,
          { cwd: process.cwd(), git_label: null, summary: 'js-libp2p conformance probe', host: 'other', delivery: 'poll', project: null, claims: [] },
          [], (n) => new Uint8Array(randomBytes(n))),
        heartbeat_ms: 30000,
        ts,
        seq: 1
      })
      // Only what the requester's summary does not name; the session holds nothing of
      // ours yet, so the first answer carries our announcement. A digest request (§8.2)
      // is answered only with whether our roster — our own announcement — is the same.
      const tag = S.rosterTag(me, mySession, ts, 1)
      let answer
      if (digest !== null) {
        ensure(have.length === 0 && away.length === 0, 'a digest request with a summary')
        answer = { v: V, announcements: [], beacons: [], same: equal(digest, S.rosterDigest([tag])) }
      } else {
        const named = [...Array(have.length / 8).keys()].some((i) => equal(have.slice(8 * i, 8 * i + 8), tag))
        answer = { v: V, announcements: named ? [] : [S.wrap('announcement', seed, body)], beacons: [], same: false }
      }
      await stream.sink([encode(answer)])
      seen.roster = true
      notify()
    } catch (e) { seen.roster = e; notify(); stream.abort(e) }
  }, { runOnLimitedConnection: false })

  // §8.3 responder: the session hands its peers its pass in a `pass` envelope (§4.3).
  await node.handle(proto('deliver'), async ({ stream }) => {
    try {
      const req = shape(decode(await readAll(stream, 1024 * 1024 + 132 * 1024, 'deliver request'),
        'deliver request'), sch.deliverRequest, 'deliver request')
      ensure(req.envelopes.length >= 1 && req.envelopes.length <= 64, 'deliver request: 1 to 64 envelopes')
      const ids = []
      for (const [i, w] of req.envelopes.entries()) {
        const { body } = S.openSigned(w, 'envelope', sch.envelope, 'sender', sch, `inbound envelope ${i}`)
        ensure(body.kind === 'pass', `the session sent an envelope of kind ${body.kind}; expected only pass`)
        ensure(equal(body.sender, them) && body.sender_session === theirSession, 'pass envelope: sender')
        ensure(equal(body.recipient, me) && body.recipient_session === mySession, 'pass envelope: recipient')
        ensure(body.sealed === null && body.name === null && body.in_reply_to === null, 'pass envelope: carries a body')
        ensure(body.reply_pass !== null && S.passValid(them, me, body.reply_pass),
          'pass envelope: reply_pass is not the sender\'s valid pass for this probe (§4.7)')
        ensure(body.ts <= Date.now() + SKEW && body.ts > Date.now() - 3600_000, 'pass envelope: ts')
        seen.pass = body.reply_pass
        ids.push(body.msg_id)
      }
      const receipt = S.wrap('receipt', seed, encode({
        v: V, recipient: me, recipient_session: mySession, sender: them, msg_ids: ids,
        state: 'delivered', ts: Date.now(), pass: myPassForThem
      }))
      await stream.sink([encode({ v: V, receipt, results: ids.map(() => ({ refused: null })) })])
    } catch (e) { seen.pass = e; stream.abort(e) }
    notify()
  })

  await node.start()
  node.services.pubsub.subscribe(topic)
  try {
    log(`listening ${node.getMultiaddrs().join(' ')}; dialing ${target}`)
    const conn = await node.dial(target, { signal: AbortSignal.timeout(10_000) })
    const connectedAt = Date.now()
    const peer = conn.remotePeer
    let dropped = null
    node.addEventListener('peer:disconnect', (e) => { if (e.detail.equals(peer)) dropped ??= Date.now() - connectedAt })
    ensure(peer.equals(target.getPeerId()), 'the Noise handshake authenticated another PeerId than --addr names')

    // Identify (§8): the session's protocol version and protocols.
    await until(() => seen.identify, 15_000, 'the session\'s identify')
    const id = seen.identify
    ensure(id.protocolVersion === `interlink-p2p/1/${network}`,
      `identify protocol version ${id.protocolVersion}, §6 says interlink-p2p/1/${network}`)
    ensure(id.agentVersion?.startsWith('interlink-p2p/'), `identify agent version ${id.agentVersion}`)
    for (const p of ['deliver', 'roster', 'mailbox', 'receipt']) {
      ensure(id.protocols.includes(proto(p)), `the session does not list ${proto(p)} in identify: ${id.protocols}`)
    }
    log(`identify ok: ${id.protocolVersion}, ${id.agentVersion}`)

    // §8.2 at its boundary, before any other roster request, so this probe is a fresh
    // peer (§8 "Budgets": the reference implementation's roster burst is exactly the
    // largest request): 16,384 tags, every one marked away, is answered — none of the
    // made-up tags names the session's announcement, so it is sent — and a summary one
    // tag over gets the empty response. Both fit the request limit (§8).
    const rosterLimit = 8 * 16384 + 16384 / 8 + 96
    const allAway = (n) => {
      const have = new Uint8Array(8 * n)
      const dv = new DataView(have.buffer)
      for (let i = 0; i < n; i++) dv.setUint32(8 * i + 4, i + 1)
      return encode({ v: V, have, away: new Uint8Array(Math.ceil(n / 8)).fill(0xff), digest: null })
    }
    const ask = async (req, what) => {
      ensure(req.length <= rosterLimit, `${what}: ${req.length} bytes, over the roster request limit (§8)`)
      let answer
      try {
        answer = await request(node, peer, proto('roster'), req, 1024 * 1024 + 1024)
      } catch (e) { fail(`${what} was not answered (§8.2): ${e.message}`) }
      ensure(answer.length > 0, `${what} was not answered (§8.2): the stream closed empty`)
      return shape(decode(answer, what), sch.rosterResponse, what)
    }
    const largest = await ask(allAway(16384), 'the largest roster request (16,384 tags, all away)')
    ensure(largest.same === false && largest.announcements.length >= 1,
      `the largest roster request: ${largest.announcements.length} announcements, same ${largest.same}`)
    // The largest request spent the whole burst; the refill (64 KiB/s) covers the few
    // small requests below after half a second.
    await new Promise((resolve) => setTimeout(resolve, 500))
    const over = await ask(allAway(16385), 'a roster request of 16,385 tags')
    ensure(over.announcements.length === 0 && over.beacons.length === 0 && over.same === false,
      'a summary of 16,385 tags: not the empty response {v, announcements: [], beacons: [], same: false}')
    log('roster boundary ok: 16,384 tags all away answered, 16,385 tags the empty response')

    // §8.2 roster fetch, and the session's announcement verified per §3, §4.1, §7.
    const none = new Uint8Array(0)
    const fetchRoster = async () => {
      const r = shape(decode(await request(node, peer, proto('roster'), encode({ v: V, have: none, away: none, digest: null }), 1024 * 1024 + 1024),
        'roster response'), sch.rosterResponse, 'roster response')
      ensure(r.same === false, 'roster response to a full request says same')
      return r
    }
    let roster = await fetchRoster()
    // §8.2's empty response: to a digest request whose digest is not the session's
    // (`same` false), and to a digest request that carries a summary; a digest of
    // another length than 16 bytes is not answered at all.
    const emptyTo = async (req, what) => {
      const r = shape(decode(await request(node, peer, proto('roster'), encode(req), 1024), what), sch.rosterResponse, what)
      ensure(r.announcements.length === 0 && r.beacons.length === 0 && r.same === false,
        `${what}: not the empty response {v, announcements: [], beacons: [], same: false}`)
    }
    const otherDigest = new Uint8Array(16).fill(7)
    await emptyTo({ v: V, have: none, away: none, digest: otherDigest }, 'roster response to another digest')
    await emptyTo({ v: V, have: new Uint8Array(8), away: none, digest: otherDigest }, 'roster response to a digest request with a summary')
    let short = none
    try {
      short = await request(node, peer, proto('roster'), encode({ v: V, have: none, away: none, digest: new Uint8Array(15) }), 1024)
    } catch { /* the stream closed unanswered */ }
    ensure(short.length === 0, 'a 15-byte digest was answered')
    log('roster empty responses ok')
    const anns = roster.announcements.map((w, i) =>
      S.openSigned(w, 'announcement', sch.announcement, 'identity', sch, `roster announcement ${i}`).body)
    for (let i = 1; i < anns.length; i++) {
      ensure(anns[i - 1].ts >= anns[i].ts, 'roster response: announcements not newest first')
    }
    let ann = anns.find((x) => equal(x.identity, them) && x.session_id === theirSession)
    ensure(ann, `the roster response has no announcement of ${hex(them)} session ${theirSession}`)
    // §4.1: the session is paired with this probe, so once it has our sealing key (from
    // the announcement we served its roster fetch) it announces details sealed for us.
    let details = await S.openDetails(seed, ann, sch)
    for (const end = Date.now() + 10_000; !details && Date.now() < end;) {
      await new Promise((resolve) => setTimeout(resolve, 200))
      roster = await fetchRoster()
      ann = roster.announcements
        .map((w, i) => S.openSigned(w, 'announcement', sch.announcement, 'identity', sch, `roster announcement ${i}`).body)
        .find((x) => equal(x.identity, them) && x.session_id === theirSession) ?? ann
      details = await S.openDetails(seed, ann, sch)
    }
    ensure(details, 'announcement: its details are not sealed for this probe, a paired identity (§4.1 "Details")')
    ensure(S.verify('sealing-key', them, S.concat(them, ann.sealing.key), ann.sealing.sig),
      'announcement: the sealing binding does not verify (§2.3)')
    ensure(equal(ann.peer_id, peer.toMultihash().bytes), 'announcement: peer_id is not the PeerId we are connected to')
    const now = Date.now()
    ensure(ann.ts <= now + SKEW, 'announcement: future-dated')
    ensure(ann.ts > now - 3 * 24 * 3600_000, 'announcement: older than the retention')
    const tcpAddr = target.decapsulateCode(421).toString()
    ensure(ann.addrs.includes(tcpAddr), `announcement: addrs ${ann.addrs} lack the address dialed, ${tcpAddr}`)
    log(`announcement ok: session ${ann.session_id}, cwd ${details.details.cwd}, host ${details.details.host}, delivery ${details.details.delivery}, seq ${ann.seq}`)

    // The session asks for our roster when the connection opens (§8.2) and, seeing a
    // peer's session, hands it its pass (§4.3).
    await until(() => seen.roster !== null, 15_000, 'the session\'s roster fetch')
    if (seen.roster instanceof Error) throw seen.roster
    await until(() => seen.pass !== null, 15_000,
      'the session\'s pass envelope (§4.3: sent once per run to each peer session it sees; is this a fresh session?)')
    if (seen.pass instanceof Error) throw seen.pass
    const theirPass = seen.pass
    log('the session fetched our roster and handed us its pass')

    // Between changes it sends a beacon every heartbeat (§7.1: 30 s; tests shorten it),
    // naming the announcement we fetched, signed by its identity (§4.9). (Its
    // announcement may come by gossip too: published when we subscribed, if it had
    // reached no one before.)
    const annTag = S.rosterTag(them, ann.session_id, ann.ts, ann.seq)
    let beacon = null
    const checkBeacons = () => {
      if (seen.gossip instanceof Error) return true
      for (const w of beacons.splice(0)) {
        try {
          const { body } = S.openBeacon(w, them, sch, 'gossiped beacon')
          if (equal(body.of, annTag)) beacon ??= body
        } catch { /* another session's beacon: not ours to check */ }
      }
      return beacon !== null
    }
    await until(checkBeacons, Number(a['gossip-wait'] ?? 45_000), `a beacon of the session on ${topic}`)
    if (seen.gossip instanceof Error) throw seen.gossip
    if (seen.gossip?.announcement) {
      ensure(seen.gossip.announcement.sealing.key.every((x, i) => x === ann.sealing.key[i]), 'gossiped announcement: another sealing key')
      log(`gossiped announcement ok on ${topic}, seq ${seen.gossip.announcement.seq}`)
    }
    ensure(beacon.seq > ann.seq && beacon.ts >= ann.ts, 'beacon: not newer than the announcement it keeps live')
    log(`gossiped beacon ok on ${topic}: of the fetched announcement, seq ${beacon.seq}, heartbeat ${beacon.heartbeat_ms} ms`)

    // §4.3, §5, §8.3: one sealed message, and the signed receipt.
    // `spoil` makes a broken one: {extra: a key no table has, ts: a value, aad: other bytes,
    // members: a group tag's members}.
    const message = async (text, spoil = {}) => {
      const msgId = randomBytes(16)
      const body = { text, task_id: 'js-probe', status: 'update', in_reply_to: null }
      if (spoil.members) body.group = { name: 'probe', thread: randomBytes(16), members: spoil.members }
      const plaintext = encode(body)
      const aad = spoil.aad ?? S.sealAad(msgId, me, them)
      const sealed = await S.seal(ann.sealing.key, plaintext, aad, (n) => randomBytes(n))
      const fields = {
        v: V,
        sender: me,
        sender_session: mySession,
        recipient: them,
        recipient_session: theirSession,
        msg_id: msgId,
        ts: spoil.ts ?? Date.now(),
        kind: 'message',
        in_reply_to: null,
        name: null,
        sealed,
        pass: theirPass,
        reply_pass: myPassForThem
      }
      if (spoil.extra) fields.extra = 'a key no table lists'
      return { msgId, envelope: S.wrap('envelope', seed, encode(fields), { key: me, session: mySession }) }
    }
    const { msgId, envelope } = await message(a.text ?? 'hello from js-libp2p')
    const sentAt = Date.now()
    const resp = shape(decode(await request(node, peer, proto('deliver'), encode({ v: V, envelopes: [envelope] }), 64 * 2048),
      'deliver response'), sch.deliverResponse, 'deliver response')
    ensure(resp.results.length === 1, `deliver response: ${resp.results.length} results for 1 envelope`)
    const refused = resp.results[0].refused
    ensure(refused === null, `the session refused the message: ${refused?.code}: ${refused?.detail}`)
    ensure(resp.receipt !== null, 'deliver response: no receipt for a stored message')
    const r = S.openSigned(resp.receipt, 'receipt', sch.receipt, 'recipient', sch, 'receipt').body
    ensure(equal(r.recipient, them) && r.recipient_session === theirSession, 'receipt: not the recipient session')
    ensure(equal(r.sender, me), 'receipt: sender is not this probe')
    ensure(r.msg_ids.some((x) => equal(x, msgId)), 'receipt: does not list the message')
    ensure(r.state === 'delivered', `receipt: state ${r.state}`)
    ensure(r.ts <= Date.now() + SKEW && r.ts >= sentAt - SKEW, `receipt: ts ${r.ts} far from now`)
    ensure(r.pass !== null && S.passValid(them, me, r.pass), 'receipt: no valid pass of the signer for the sender (§4.4)')
    ensure(equal(r.pass, theirPass), 'receipt: pass differs from the pass envelope\'s (Ed25519 is deterministic, §4.7)')
    log(`delivered ${hex(msgId)}, receipt verified in ${Date.now() - sentAt} ms`)

    // §8.3 checks before decoding: another request `v` refuses every envelope
    // `unsupported_version`, nothing receipted; a request with no envelopes is not answered.
    const other = shape(decode(await request(node, peer, proto('deliver'), encode({ v: V + 1, envelopes: [envelope] }), 64 * 2048),
      'deliver response to v+1'), sch.deliverResponse, 'deliver response to v+1')
    ensure(other.receipt === null && other.results.length === 1 &&
      other.results[0].refused?.code === 'unsupported_version',
    `a deliver request with v ${V + 1} was not refused unsupported_version: ${JSON.stringify(other.results)}`)
    let answered
    try {
      answered = await request(node, peer, proto('deliver'), encode({ v: V, envelopes: [] }), 64 * 2048)
    } catch { answered = null }
    ensure(answered === null || answered.length === 0,
      `a deliver request with no envelopes was answered: ${hex(answered ?? [])}`)
    // §1, §4.3, §8.7: what a decoder must refuse, each envelope validly signed.
    const broken = [
      [await message('an unknown key', { extra: true }), 'malformed'],
      [await message('a float ts', { ts: new S.Float64(Date.now()) }), 'malformed'],
      [await message('sealed for another envelope', { aad: S.sealAad(randomBytes(16), me, them) }), 'unopenable'],
      // §4.3: a group tag lists the copy's recipient session and never the sender's.
      [await message('a group without the recipient', { members: [{ key: them, session: 'not-' + theirSession.slice(0, 40) }] }), 'unopenable'],
      [await message('a group with the sender', {
        members: [{ key: them, session: theirSession }, { key: me, session: mySession }]
      }), 'unopenable']
    ]
    const spoilt = shape(decode(await request(node, peer, proto('deliver'),
      encode({ v: V, envelopes: broken.map(([m]) => m.envelope) }), 64 * 2048),
    'deliver response to broken envelopes'), sch.deliverResponse, 'deliver response to broken envelopes')
    ensure(spoilt.receipt === null, 'a receipt for envelopes that were all refused')
    ensure(spoilt.results.length === broken.length, 'one result per envelope')
    broken.forEach(([, code], i) => ensure(spoilt.results[i].refused?.code === code,
      `broken envelope ${i}: refused ${JSON.stringify(spoilt.results[i].refused)}, expected ${code}`))
    log(`refusals ok: unsupported_version; an empty request ${answered === null ? 'failed' : 'got an empty stream'}; ` +
      spoilt.results.map((r) => `${r.refused.code} (${r.refused.detail})`).join('; '))
    // §4.3: `also_about` is left out when empty, so a `host_queued` receipt carrying
    // `also_about: []` is malformed; the same receipt about one further message is
    // taken (so the refusal is the empty array's).
    const hostQueued = (alsoAbout) => S.wrap('envelope', seed, encode({
      v: V,
      sender: me,
      sender_session: mySession,
      recipient: them,
      recipient_session: theirSession,
      msg_id: randomBytes(16),
      ts: Date.now(),
      kind: 'host_queued',
      in_reply_to: randomBytes(16),
      also_about: alsoAbout,
      name: null,
      sealed: null,
      pass: theirPass,
      reply_pass: myPassForThem
    }), { key: me, session: mySession })
    const refusalOf = async (alsoAbout, what) => {
      const r = shape(decode(await request(node, peer, proto('deliver'),
        encode({ v: V, envelopes: [hostQueued(alsoAbout)] }), 64 * 2048), what), sch.deliverResponse, what)
      ensure(r.results.length === 1, `${what}: ${r.results.length} results for 1 envelope`)
      return r.results[0].refused
    }
    const emptyAbout = await refusalOf([], 'deliver response to also_about: []')
    ensure(emptyAbout?.code === 'malformed',
      `a receipt with also_about: [] was not refused malformed: ${JSON.stringify(emptyAbout)}`)
    const oneAbout = await refusalOf([randomBytes(16)], 'deliver response to also_about of one id')
    ensure(oneAbout === null, `a receipt about two messages was refused: ${JSON.stringify(oneAbout)}`)
    log(`also_about ok: [] refused malformed (${emptyAbout.detail}), one id taken`)

    // §4.8, §8.5: a mailbox is handed to its owner only. The probe asks for the
    // session's own mailbox under its own signature (refused), for its own mailbox at
    // another holder (refused), and for its own mailbox at this holder (answered).
    const fetchAt = async (owner, ownerSession, holder) => {
      const wrapper = S.wrap('mailbox-fetch', seed, encode({
        v: V, owner, owner_session: ownerSession, holder, ts: Date.now()
      }))
      const answer = decode(await request(node, peer, proto('mailbox'),
        encode({ v: V, op: { fetch: { request: wrapper } } }), 4 * 1024 * 1024 + 64 * 1024), 'mailbox response')
      ensure(answer.v === V && answer.outcome && Object.keys(answer.outcome).length === 1,
        `mailbox response: ${JSON.stringify(answer)}`)
      return answer.outcome
    }
    const holder = peer.toMultihash().bytes
    const theirs = await fetchAt(them, theirSession, holder)
    ensure(theirs.refused?.reason?.code === 'bad_signature',
      `a fetch of the session's mailbox signed by the probe was not refused bad_signature: ${JSON.stringify(theirs)}`)
    const elsewhere = await fetchAt(me, mySession, randomBytes(38))
    ensure(elsewhere.refused?.reason?.code === 'wrong_recipient',
      `a fetch addressed to another holder was not refused wrong_recipient: ${JSON.stringify(elsewhere)}`)
    const mine = await fetchAt(me, mySession, holder)
    ensure(mine.record && (mine.record.record === null || mine.record.record instanceof Uint8Array),
      `the probe's own fetch was not answered with a record: ${JSON.stringify(mine)}`)
    log('mailbox ok: another owner\'s mailbox refused bad_signature, another holder\'s refused ' +
      `wrong_recipient, our own answered (${mine.record.record === null ? 'empty' : 'a copy'})`)

    // §8 "Connections": a node whose identify has another protocol version is dropped
    // about a second after identify; this one must still be connected after two.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, connectedAt + 2000 - Date.now())))
    ensure(dropped === null && node.getConnections(peer).length > 0,
      `the session dropped the connection ${dropped} ms after it opened (identify protocol version refused?)`)
    log('still connected 2 s after identify')
    process.stdout.write(`delivered ${hex(msgId)}\n`)
  } finally {
    await node.stop()
  }
}

async function main () {
  const [mode, ...rest] = process.argv.slice(2)
  const spec = S.readSpec(fileURLToPath(new URL('../../docs/PROTOCOL.md', import.meta.url)))
  if (mode === 'keygen') {
    const seed = randomBytes(32)
    const key = S.identityKey(seed)
    process.stdout.write(JSON.stringify({ seed: hex(seed), identity_key: hex(key), fingerprint: S.fingerprint(key) }) + '\n')
    return
  }
  const n = await checkVectors(spec)
  log(`vectors: all ${n} of PROTOCOL.md (version ${spec.version}) re-derived and verified`)
  if (mode === 'vectors') return
  if (mode === 'live') return live(spec, args(rest))
  fail(`usage: probe.mjs vectors | keygen | live --seed HEX --addr MA --identity HEX --session ID`)
}

main().then(() => process.exit(0), (e) => {
  process.stderr.write(`js-probe: FAILED: ${e instanceof S.Mismatch ? e.message : e.stack}\n`)
  process.exit(1)
})
