#!/usr/bin/env python3
"""Writes valid seed inputs for the fuzz targets from the test vectors in docs/PROTOCOL.md.

Valid, signed inputs let the fuzzer reach the code after signature verification
(field checks, mailbox normalisation) instead of stopping at the first byte it breaks.
Run from fuzz/: python3 make-seeds.py
"""
import os, re

spec = open(os.path.join(os.path.dirname(__file__), "..", "docs", "PROTOCOL.md")).read()
block = spec[spec.index("```vectors") + len("```vectors"):]
block = block[: block.index("```")]
vectors, name = {}, None
for line in block.splitlines():
    if line.endswith(" ="):
        name = line[:-2].strip()
        vectors[name] = ""
    elif name and line.strip():
        vectors[name] += line.strip()
raw = {k: bytes.fromhex(v) for k, v in vectors.items() if k.endswith(".wire") or k.endswith("_key")}


def head(major, n):
    if n < 24:
        return bytes([major << 5 | n])
    if n < 256:
        return bytes([major << 5 | 24, n])
    if n < 65536:
        return bytes([major << 5 | 25]) + n.to_bytes(2, "big")
    return bytes([major << 5 | 26]) + n.to_bytes(4, "big")


def bstr(b):
    return head(2, len(b)) + b


def tstr(s):
    return head(3, len(s.encode())) + s.encode()


def write(target, name, data):
    d = os.path.join("seeds", target)
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, name), "wb").write(data)


for kind in ["announcement", "envelope", "receipt", "ack", "goodbye"]:
    write(kind, "vector", raw[kind + ".wire"])
write("envelope", "knock-invite", raw["knock_invite.wire"])
write("envelope", "host-queued-three", raw["host_queued_three.wire"])
write("invite", "vector", vectors["invite.code"].encode())
# The device-link target picks its reader by the first byte (0 code text, 1 request,
# 2-4 response to step 1-3).
write("device_link", "code", bytes([0]) + vectors["device.code"].encode())
write("device_link", "hello", bytes([1]) + raw["device_hello.wire"])
write("device_link", "reveal", bytes([1]) + raw["device_reveal.wire"])
write("device_link", "confirm", bytes([1]) + raw["device_confirm.wire"])
write("device_link", "accept", bytes([2]) + raw["device_accept.wire"])
write("device_link", "reveal-ok", bytes([3]) + raw["device_reveal_ok.wire"])
write("device_link", "sealed", bytes([4]) + raw["device_sealed.wire"])
write("presence", "announcement", head(5, 1) + tstr("announcement") + bstr(raw["announcement.wire"]))
write("presence", "goodbye", head(5, 1) + tstr("goodbye") + bstr(raw["goodbye.wire"]))
mailbox = (
    head(5, 5)
    # The mailbox record version (core::mailbox::RECORD_VERSION), not the protocol's.
    + tstr("v") + bytes([3])
    + tstr("owner") + bstr(raw["bob.identity_key"])
    + tstr("session") + tstr("session-b")
    + tstr("envelopes") + head(4, 1) + bstr(raw["envelope.wire"])
    + tstr("acks") + head(4, 0)
)
write("mailbox", "one-envelope", mailbox)
# The overlay target picks the message type by the first byte (6: receipt request).
write("overlay", "receipt-request", bytes([6]) + raw["receipt_request.wire"])
write("overlay", "mailbox-fetch", bytes([4]) + raw["mailbox_fetch_request.wire"])
# The details target reads its input as sealed details in Alice's announcement of
# session-a, as Bob: the vector's details open there. Also the plaintext they open to.
ann = raw["announcement.wire"]
start = ann.index(tstr("details")) + len(tstr("details"))
write("details", "sealed-for-bob", ann[start:ann.index(tstr("heartbeat_ms"), start)])
write("details", "plaintext", bytes.fromhex(vectors["announcement.details.plaintext"]))
write("keyfile", "vector", ("interlink-p2p-ed25519-v1 " + "11" * 32 + "\n").encode())
print("seeds written under fuzz/seeds/")
