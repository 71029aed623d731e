// libp2p 2.10's peer store locks through it-queue, which calls Promise.withResolvers
// (Node 22); Node 20 lacks it. Imported before anything else by probe.mjs.
if (typeof Promise.withResolvers !== 'function') {
  Promise.withResolvers = function withResolvers () {
    let resolve, reject
    const promise = new this((res, rej) => { resolve = res; reject = rej })
    return { promise, resolve, reject }
  }
}
