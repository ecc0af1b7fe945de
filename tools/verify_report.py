#!/usr/bin/env python3
"""Verify a VIPS certification report without the SDK: Python's standard
library plus `cryptography` (docs/report-format.md, "Verifying with standard
tools").

    python3 tools/verify_report.py report.json --pubkey vips-key.pub.pem \
        [--provider libvsdk_provider_x.so] [--golden suite.golden]

Rebuilds the DSSE pre-authentication encoding from the envelope, checks an
Ed25519 signature over it with the public key, checks the statement is a VIPS
certification statement, and compares the given files' SHA-256 with the
subjects. Prints the verdict. Exit code 0 when everything verifies and the
report says CERTIFIED, 1 otherwise.
"""

import argparse
import base64
import binascii
import hashlib
import json
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import load_pem_public_key

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://vips-sdk.dev/attestation/certification/v1"


def b64decode(text):
    """Standard or URL-safe base64, as DSSE verifiers must accept."""
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error:
        return base64.urlsafe_b64decode(text)


def pae(payload_type, body):
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(body), body)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 16), b""):
            h.update(chunk)
    return h.hexdigest()


def fail(message):
    print(f"DOES NOT VERIFY: {message}")
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report")
    ap.add_argument("--pubkey", required=True)
    ap.add_argument("--provider")
    ap.add_argument("--golden")
    args = ap.parse_args()

    with open(args.report, "rb") as f:
        envelope = json.load(f)
    with open(args.pubkey, "rb") as f:
        key = load_pem_public_key(f.read())
    if not isinstance(key, Ed25519PublicKey):
        fail(f"{args.pubkey} is not an Ed25519 public key")
    if envelope.get("payloadType") != PAYLOAD_TYPE:
        fail(f"payloadType is {envelope.get('payloadType')!r}, not {PAYLOAD_TYPE}")
    body = b64decode(envelope["payload"])
    message = pae(envelope["payloadType"], body)
    if not envelope.get("signatures"):
        fail("the report is unsigned")
    verified = False
    for s in envelope["signatures"]:
        try:
            key.verify(b64decode(s["sig"]), message)
            verified = True
            break
        except (InvalidSignature, binascii.Error, ValueError):
            continue
    if not verified:
        fail("no signature verifies with this key over the PAE of the payload")

    statement = json.loads(body)
    if statement.get("_type") != STATEMENT_TYPE or statement.get("predicateType") != PREDICATE_TYPE:
        fail("not a VIPS certification statement")
    subjects = statement["subject"]
    p = statement["predicate"]
    expected = [(p["provider"]["library"], p["provider"]["library_sha256"]),
                (p["component"]["golden"], p["component"]["golden_sha256"])]
    if [(x["name"], x["digest"].get("sha256")) for x in subjects] != expected:
        fail("the subjects are not the predicate's provider library and golden set")
    for what, path, subject in (("provider library", args.provider, subjects[0]),
                                ("golden vector set", args.golden, subjects[1])):
        if path is None:
            continue
        actual = sha256_file(path)
        if actual != subject["digest"]["sha256"]:
            fail(f"the {what} {path} has SHA-256 {actual}; the report certifies "
                 f"{subject['name']} with {subject['digest']['sha256']}")

    print(f"signature verified; verdict {p['verdict']}: {p['component']['id']} "
          f"{p['component']['version']} at {p['tier']} on {p['provider']['name']} "
          f"({subjects[0]['name']} sha256 {subjects[0]['digest']['sha256']}), "
          f"device {p['device']['name']}, {p['run']['finished']}")
    for reason in p["reasons"]:
        print(f"  - {reason}")
    sys.exit(0 if p["verdict"] == "CERTIFIED" else 1)


if __name__ == "__main__":
    main()
