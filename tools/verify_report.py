#!/usr/bin/env python3
"""Verify a VIPS certification report without the SDK: Python's standard
library plus `cryptography` (docs/report-format.md, "Verifying").

    python3 tools/verify_report.py report.json --pubkey vips-key.pub.pem \
        [--pubkey other.pub.pem] [--provider libvsdk_provider_x.so] [--golden suite.golden]

The same checks as `vips-conformance verify`, in the same order and with the
same messages: the envelope is JSON with no key twice in any object, in the
form the runner writes; its payload type is ours; a signature by one of the
keys verifies over the DSSE pre-authentication encoding (PAE); the payload is
a VIPS certification statement (again no repeated key, every field present
with its type) whose subjects are the predicate's provider library and golden
set; its verdict and reasons are what the rule of `Predicate::assess`
(sdk/certify/src/predicate.rs) gives for its own records; and the given files'
SHA-256 equal the subjects'. Exit code 0 when the report verifies and says
CERTIFIED; 1 when it does not verify or says NOT CERTIFIED; 2 for an input
error (an unreadable or malformed report or key).
"""

import argparse
import base64
import hashlib
import json
import math
import os
import stat
import sys

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    PublicFormat,
    load_pem_public_key,
)

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://vips-sdk.dev/attestation/certification/v1"
MAX_REPORT_BYTES = 64 << 20
MAX_SIGNATURES = 64
MAX_SHARDS = 4096
# Ed25519's group order, and the encoding of the identity point: a
# signature whose R is the identity verifies under RFC 8032 (and OpenSSL)
# but not under ed25519-dalek's verify_strict, which `verify` uses.
ED25519_L = 2**252 + 27742317777372353535851937790883648493
IDENTITY = b"\x01" + bytes(31)


class Refused(Exception):
    """The report does not verify (exit 1)."""


class InputError(Exception):
    """An unreadable or malformed input (exit 2)."""


# --- JSON read as serde_json reads it ---------------------------------------


def _text(s):
    """A string serde_json would read: no lone surrogate escapes."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("a lone surrogate in a string") from None
    return s


class _Repeated(dict):
    """An object with a key twice: its pairs, kept to name the key."""


def _pairs(pairs):
    keys = [_text(k) for k, _ in pairs]
    if len(set(keys)) < len(keys):
        obj = _Repeated(pairs)
        obj.pairs = pairs
        return obj
    return dict(pairs)


def _first_repeated(value, path=""):
    """The first repeated key in document order (`predicate.verdict`), as a
    streaming reader meets it."""
    if isinstance(value, list):
        for i, v in enumerate(value):
            found = _first_repeated(v, f"{path}[{i}]")
            if found:
                return found
    elif isinstance(value, dict):
        seen = set()
        for k, v in getattr(value, "pairs", value.items()):
            here = f"{path}.{k}" if path else k
            if k in seen:
                return here
            seen.add(k)
            found = _first_repeated(v, here)
            if found:
                return found
    return None


def _int(s):
    # serde_json: -0 is a float, and an integer beyond u64/i64 a float.
    if s == "-0":
        return -0.0
    v = int(s)
    if -(2**63) <= v <= 2**64 - 1:
        return v
    return _float(s)


def _float(s):
    v = float(s)
    if not math.isfinite(v):
        raise ValueError(f"number out of range: {s}")
    return v


def _constant(name):
    raise ValueError(f"`{name}` is not JSON")


def loads(data):
    """JSON from bytes: UTF-8, no key twice in any object (Python keeps the
    last of repeated keys; another reader may keep the first), no NaN or
    Infinity, numbers typed as serde_json types them."""
    repeated = []

    def hook(pairs):
        obj = _pairs(pairs)
        if isinstance(obj, _Repeated):
            repeated.append(obj)
        return obj

    try:
        value = json.loads(
            data.decode("utf-8"),
            object_pairs_hook=hook,
            parse_int=_int,
            parse_float=_float,
            parse_constant=_constant,
        )
        if repeated:
            raise ValueError(f"the key `{_first_repeated(value)}` appears twice")
    except (ValueError, RecursionError) as e:
        raise ValueError(str(e) or type(e).__name__) from None
    return value


# --- the form the runner writes: every field present, with its type ---------

STR, BOOL, NUM, FLOAT = "str", "bool", "num", "json_float"
U32, U64 = ("uint", 2**32 - 1), ("uint", 2**64 - 1)


def opt(t):
    return ("opt", t)


def listof(t):
    return ("list", t)


def oneof(*names):
    return ("enum", names)


STATUSES = (
    "pass", "fail", "not_supported", "error", "crashed", "timeout", "missing",
    "out_of_bounds", "unwritten", "flaky", "expected_fail", "unexpected_pass",
    "memory_limit", "processes_left", "not_captured",
)
HOST = {"os": STR, "kernel": STR, "arch": STR, "cpu": STR, "logical_cpus": U64}
SHARD = {"k": U64, "n": U64}
NODE = {"node": U64, "op": STR, "output": STR, "max_e": FLOAT}
OUTPUT = ("fields", dict(
    {"tensor": STR, "passed": BOOL, "elements": U64, "over_bound": U64},
    **{f: FLOAT for f in (
        "max_e", "margin", "p50_e", "p90_e", "p99_e", "rms_e", "max_abs_error",
        "golden_max_abs_error", "golden_rel_l2_error", "golden_cosine_similarity")},
    sha256=STR,
), {f: FLOAT for f in ("rms_t", "bias_ratio", "tolerance_factor")})  # absent where not tested
STAGE = {
    "stage": STR, "status": oneof(*STATUSES),
    "execution": opt(oneof("fused", "decomposed", "captured")),
    "attempts": U32, "seconds": NUM, "reason": opt(STR), "outputs": listof(OUTPUT),
    "findings": listof(STR), "tightest_node": opt(NODE), "drill_down": opt(NODE),
}
SANDBOX = {  # sdk/execution/src/sandbox/facts.rs
    "namespaces": listof(STR), "no_new_privs": BOOL, "seccomp": opt(STR),
    "private_root": BOOL, "binds": listof(STR), "writable": listof(STR),
    "device_nodes": listof(STR), "memory_limit_bytes": opt(U64),
    "memory_limit_by": listof(STR), "max_processes": opt(U64),
    "max_file_bytes": opt(U64), "core_dumps": BOOL, "runner_non_dumpable": BOOL,
    "tree_confirmed_dead": BOOL, "missing": listof(STR),
}
PREDICATE = ("fields", {  # sdk/certify/src/predicate.rs
    "verdict": oneof("CERTIFIED", "NOT CERTIFIED"),
    "reasons": listof(STR),
    "component": {f: STR for f in ("id", "version", "document_sha256", "golden", "golden_sha256")},
    "tier": oneof("fp32", "fp16", "bf16", "exact"),
    "mode": oneof("isolated", "chained"),
    "sdk": {"version": STR, "runner_sha256": STR, "worker_sha256": opt(STR)},
    "provider": {"library": STR, "library_sha256": STR, "name": STR, "vendor": STR,
                 "version": STR, "abi_version": U32, "claim_note": opt(STR)},
    "device": {"name": STR, "driver_version": STR, "memory_bytes": U64, "stable_id": STR},
    "reference": {f: STR for f in ("library", "library_sha256", "name", "version")},
    "host": HOST,
    "run": {"seed": U64, "nonce": U64, "nonce_given": BOOL, "started": STR,
            "finished": STR, "isolated": BOOL, "sandbox": opt(SANDBOX),
            "stage_glob": opt(STR), "shard": opt(SHARD), "flake_retries": U32,
            "baseline": BOOL, "stopped_early": opt(STR), "teardown": opt(STR)},
    "shards": listof({"shard": SHARD, "nonce": U64, "host": HOST, "device_stable_id": STR,
                      "runner_sha256": STR, "started": STR, "finished": STR}),
    "must_pass": listof(STR),
    "stages": listof(STAGE),
    "differential": {"ran": BOOL, "stages": listof(STAGE)},
    "determinism": {"required": BOOL, "nondeterministic_stages": listof(STR)},
    "end_to_end": listof({"tensor": STR, "passed": BOOL, "rel_l2_error": FLOAT,
                          "cosine_similarity": FLOAT, "max_rel_l2": FLOAT, "min_cosine": FLOAT}),
}, {
    # Absent only in reports made before the kernel contract existed.
    "contract": {"ran": BOOL, "kernels": listof(STR), "cases": listof(STAGE)},
})
STATEMENT = {
    "_type": STR,
    "subject": listof({"name": STR, "digest": ("map", STR)}),
    "predicateType": STR,
    "predicate": PREDICATE,
}
ENVELOPE = {
    "payload": STR,
    "payloadType": STR,
    "signatures": listof(("fields", {"sig": STR}, {"keyid": STR})),
}


def check(value, t, path=""):
    """Raises ValueError naming the first place `value` is not of type `t`."""
    def at(key):
        return f"{path}.{key}" if path else key

    def bad(what):
        raise ValueError(f"`{path or 'the document'}` is not as the runner writes it: {what}")

    if isinstance(t, dict):
        t = ("fields", t, {})
    kind = t if isinstance(t, str) else t[0]
    if kind == "fields":
        required, optional = t[1], t[2]
        if not isinstance(value, dict):
            bad("not an object")
        for key in value:
            if key not in required and key not in optional:
                bad(f"unknown field `{key}`")
        for key in required:
            if key not in value:
                bad(f"no field `{key}`")
        for key, sub in list(required.items()) + list(optional.items()):
            if key in value:
                check(value[key], sub, at(key))
    elif kind == "opt":
        if value is not None:
            check(value, t[1], path)
    elif kind == "list":
        if not isinstance(value, list):
            bad("not a list")
        for i, v in enumerate(value):
            check(v, t[1], f"{path}[{i}]")
    elif kind == "map":
        if not isinstance(value, dict):
            bad("not an object")
        for k, v in value.items():
            check(v, t[1], at(k))
    elif kind == "enum":
        if not isinstance(value, str) or value not in t[1]:
            bad(f"{value!r} is not one of {', '.join(t[1])}")
    elif kind == STR:
        if not isinstance(value, str):
            bad("not a string")
        _text(value)
    elif kind == BOOL:
        if not isinstance(value, bool):
            bad("not true or false")
    elif kind == "uint":
        if not (isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= t[1]):
            bad(f"{value!r} is not an integer from 0 to {t[1]}")
    elif kind == NUM:
        if not isinstance(value, float):
            bad(f"{value!r} is not a number with a fraction or exponent")
    elif kind == FLOAT:
        if not (isinstance(value, float) or value in ("NaN", "inf", "-inf")):
            bad(f"{value!r} is not a number with a fraction or exponent, \"NaN\", \"inf\" or \"-inf\"")
    else:
        raise AssertionError(f"unknown type {t!r}")


# --- the verdict rule: Predicate::assess -------------------------------------


def status_phrase(status):
    if status == "fail":
        return "failing stages"
    if status == "flaky":
        return "flaky stages (failed, then passed on a retry: never a pass)"
    if status == "expected_fail":
        return ("stages failing as the baseline expects (a baseline tracks failures; "
                "it does not excuse them)")
    # Status::label: the JSON name in capitals, words apart (MEMORY LIMIT).
    return "stages " + status.replace("_", " ").upper()


def round_reasons(must_pass, records, round_name, out):
    """One reason per status listing its stages, in order of first
    appearance, then the must-pass stages with no record."""
    suffix = f" {round_name}" if round_name else ""
    never, by_status = [], []
    for name in must_pass:
        found = False
        for r in records:
            if r["stage"] != name:
                continue
            found = True
            if r["status"] == "pass":
                continue
            for entry in by_status:
                if entry[0] == r["status"]:
                    entry[1].append(name)
                    break
            else:
                by_status.append((r["status"], [name]))
        if not found:
            never.append(name)
    for status, names in by_status:
        out.append(f"{status_phrase(status)}{suffix}: {', '.join(names)}")
    if never:
        out.append(f"never run{suffix}: {', '.join(never)}")


def contract_reasons(c, out):
    """Contract::reasons: it ran, every kernel has a case, every case passed
    (one reason per status), the concurrency pass is recorded."""
    if not c["ran"]:
        out.append("the kernel contract did not run (--no-contract, or a shard other than 1): "
                   "nothing shows the kernels keep the calling contract (strides, broadcasts, "
                   "concurrency, extreme values)")
        return
    uncovered = [k for k in c["kernels"]
                 if not any(r["stage"].startswith(k + " ") for r in c["cases"])]
    if uncovered:
        out.append(f"kernel contract: no case ran for {', '.join(uncovered)} "
                   "(the provider claims none of its dtypes, or the run was filtered to stages that do "
                   "not use it)")
    by_status = []
    for r in c["cases"]:
        if r["status"] == "pass":
            continue
        for entry in by_status:
            if entry[0] == r["status"]:
                entry[1].append(r["stage"])
                break
        else:
            by_status.append((r["status"], [r["stage"]]))
    for status, names in by_status:
        label = status.replace("_", " ").upper()
        out.append(f"kernel contract {label}: {', '.join(names)}")
    if c["cases"] and not any(r["stage"] == "concurrency" for r in c["cases"]):
        out.append("kernel contract: the concurrency pass has no record")


NAMESPACES = ("user", "pid", "mount", "ipc", "net")
SECCOMP_FILTER = "vsdk-worker-v1"


def lacking(facts):
    """sandbox::Facts::lacking: the protections a certificate requires that
    these facts lack."""
    out = []
    absent = [n for n in NAMESPACES if n not in facts["namespaces"]]
    if absent:
        out.append(f"no {', '.join(absent)} namespace")
    if not facts["no_new_privs"]:
        out.append("no no_new_privs")
    if facts["seccomp"] != SECCOMP_FILTER:
        out.append(f"no seccomp filter {SECCOMP_FILTER}")
    if not facts["private_root"]:
        out.append("the worker saw the host's files")
    if facts["memory_limit_bytes"] is None or not facts["memory_limit_by"]:
        out.append("no memory limit")
    if facts["max_processes"] is None:
        out.append("no process limit")
    if facts["max_file_bytes"] is None:
        out.append("no file size limit")
    if facts["core_dumps"]:
        out.append("core dumps allowed")
    if not facts["runner_non_dumpable"]:
        out.append("the runner was dumpable")
    if not facts["tree_confirmed_dead"]:
        out.append("the worker's processes were not confirmed gone")
    return out


def assess(p):
    """The verdict and reasons the records give."""
    reasons = []
    run = p["run"]
    if p["shards"]:
        n = p["shards"][0]["shard"]["n"]
        absent = [f"{k}/{n}" for k in range(1, min(n, MAX_SHARDS) + 1)
                  if not any(s["shard"] == {"k": k, "n": n} for s in p["shards"])]
        if absent:
            reasons.append(f"incomplete merge: no report for shard(s) {', '.join(absent)}")
    if not p["must_pass"]:
        reasons.append("the must-pass list is empty: nothing was certified")
    if p["reference"]["name"] != "cpu":
        reasons.append(f"the reference was provider `{p['reference']['name']}`, "
                       "not the SDK's CPU reference provider `cpu`")
    if run["nonce_given"]:
        reasons.append("the differential round's nonce was given (--nonce): "
                       "its inputs were known before the run")
    if not run["isolated"]:
        reasons.append("the provider ran inside the runner's process (--no-isolate): "
                       "it could have altered the runner")
    elif run["sandbox"] is None:
        reasons.append("the worker's sandbox is not recorded")
    elif lacking(run["sandbox"]):
        reasons.append(f"the worker was not fully sandboxed: {'; '.join(lacking(run['sandbox']))}")
    if run["stage_glob"] is not None:
        reasons.append(f"the run was filtered to the stages matching `{run['stage_glob']}`")
    if run["shard"] is not None:
        reasons.append(f"shard {run['shard']['k']}/{run['shard']['n']} of the suite only: "
                       "merge every shard's report (`vips-conformance merge`)")
    if run["stopped_early"] is not None:
        reasons.append(f"stopped early: {run['stopped_early']}")
    if run["teardown"] is not None:
        reasons.append(run["teardown"])
    round_reasons(p["must_pass"], p["stages"], "", reasons)
    if p["differential"]["ran"]:
        round_reasons(p["must_pass"], p["differential"]["stages"],
                      "in the differential round (fresh inputs)", reasons)
    else:
        reasons.append("the differential round (fresh inputs from a run-time seed) did not run: "
                       "nothing shows the outputs were computed rather than replayed")
    if "contract" in p:
        contract_reasons(p["contract"], reasons)
    e2e = [e["tensor"] for e in p["end_to_end"] if not e["passed"]]
    if e2e:
        reasons.append(f"end to end out of bounds: {', '.join(e2e)}")
    return ("NOT CERTIFIED" if reasons else "CERTIFIED"), reasons


# --- the envelope ------------------------------------------------------------


def b64decode(text):
    """Standard or URL-safe base64 with canonical padding and no stray bits,
    as the Rust verifier reads it (Python alone would also take a payload
    whose last character has its unused bits set)."""
    for alphabet, decode, encode in (
        ("+/", base64.b64decode, base64.b64encode),
        ("-_", base64.urlsafe_b64decode, base64.urlsafe_b64encode),
    ):
        allowed = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789=" + alphabet)
        if not set(text) <= allowed:
            continue
        try:
            data = decode(text)
        except ValueError:
            continue
        if encode(data).decode("ascii") == text:
            return data
    raise ValueError("not canonical standard or URL-safe base64")


def pae(payload_type, body):
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(body), body)


def key_id(key):
    """Hex SHA-256 of the key's SPKI DER (keys::key_id)."""
    return hashlib.sha256(key.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)).hexdigest()


def signature_verifies(key, sig, message):
    """Ed25519 as ed25519-dalek's verify_strict: 64 bytes, S below the group
    order, R not of small order (the identity is the only small-order R
    that can verify), then RFC 8032."""
    if len(sig) != 64 or int.from_bytes(sig[32:], "little") >= ED25519_L or sig[:32] == IDENTITY:
        return False
    try:
        key.verify(sig, message)
        return True
    except InvalidSignature:
        return False


def listed(ids):
    return ", ".join(ids) if ids else "no key"


def verify_envelope(envelope, keys):
    """dsse::Envelope::verify with a threshold of 1: the payload bytes."""
    try:
        body = b64decode(envelope["payload"])
    except ValueError as e:
        raise Refused(f"the payload is not base64: {e}")
    signatures = envelope["signatures"]
    if not signatures:
        raise Refused("the report is unsigned (it carries no signature)")
    if len(signatures) > MAX_SIGNATURES:
        raise Refused(f"{len(signatures)} signatures, more than the {MAX_SIGNATURES} "
                      "an envelope may carry")
    if envelope["payloadType"] != PAYLOAD_TYPE:
        raise Refused(f"payload type `{envelope['payloadType']}` is not one this verifier accepts")
    message = pae(envelope["payloadType"], body)
    decoded = []
    for s in signatures:
        try:
            decoded.append(b64decode(s["sig"]))
        except ValueError:
            pass
    # keyids are hints: every signature is tried with every key.
    if any(signature_verifies(k, sig, message) for k, _ in keys for sig in decoded):
        return body
    trusted = [i for _, i in keys]
    named = next((s["keyid"] for s in signatures if s.get("keyid") in trusted), None)
    if named is not None:
        raise Refused(f"the signature by key {named} does not verify: the payload, its type "
                      "or the signature was modified after signing")
    raise Refused(f"not signed by the given key (signed by "
                  f"{listed([s.get('keyid', 'an unnamed key') for s in signatures])}; "
                  f"the given key is {listed(trusted)})")


# --- the whole check ---------------------------------------------------------


def read_bounded(path, what):
    try:
        with open(path, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise InputError(f"{path}: not a regular file")
            data = f.read(MAX_REPORT_BYTES + 1)
    except OSError as e:
        raise InputError(f"{path}: cannot read the {what}: {e.strerror}") from None
    if len(data) > MAX_REPORT_BYTES:
        raise InputError(f"{path}: larger than {MAX_REPORT_BYTES} bytes")
    return data


def sha256_file(path):
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 16), b""):
                h.update(chunk)
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    return h.hexdigest()


def not_statement(message):
    return Refused(f"the signed payload is not a VIPS certification statement: {message}")


def verify(report, pubkeys, provider, golden):
    """The statement of a verified report, or Refused / InputError."""
    keys = []
    for path in pubkeys:
        try:
            key = load_pem_public_key(read_bounded(path, "public key"))
        except (ValueError, UnsupportedAlgorithm) as e:
            raise InputError(f"{path}: not a PEM public key: {e}") from None
        if not isinstance(key, Ed25519PublicKey):
            raise InputError(f"{path} is not an Ed25519 public key")
        keys.append((key, key_id(key)))
    files = [(what, p, sha256_file(p)) for what, p in
             (("provider library", provider), ("golden vector set", golden)) if p is not None]

    data = read_bounded(report, "report")
    try:
        envelope = loads(data)
        check(envelope, ENVELOPE)
    except ValueError as e:
        raise InputError(f"{report}: not a DSSE envelope (JSON with payload, payloadType, "
                         f"signatures): {e}") from None
    body = verify_envelope(envelope, keys)
    try:
        statement = loads(body)
        check(statement, STATEMENT)
    except ValueError as e:
        raise not_statement(e) from None
    if statement["_type"] != STATEMENT_TYPE:
        raise not_statement(f"`_type` is `{statement['_type']}`, not `{STATEMENT_TYPE}`")
    if statement["predicateType"] != PREDICATE_TYPE:
        raise not_statement(f"`predicateType` is `{statement['predicateType']}`, "
                            f"not `{PREDICATE_TYPE}`")
    p = statement["predicate"]
    subjects = statement["subject"]
    expected = [(p["provider"]["library"], p["provider"]["library_sha256"]),
                (p["component"]["golden"], p["component"]["golden_sha256"])]
    if [(s["name"], s["digest"].get("sha256")) for s in subjects] != expected:
        raise not_statement("the subjects are not the predicate's provider library and golden set")
    verdict, reasons = assess(p)
    if (verdict, reasons) != (p["verdict"], p["reasons"]):
        def listed(r):
            return "; ".join(r) if r else "none"
        raise not_statement(f"the verdict `{p['verdict']}` does not follow from the report's own "
                            f"records, which give `{verdict}` (reasons: {listed(reasons)}); "
                            f"the report's reasons: {listed(p['reasons'])}")
    for what, path, actual in files:
        subject = subjects[0] if what == "provider library" else subjects[1]
        certified = subject["digest"].get("sha256", "")
        if actual != certified:
            raise Refused(f"the {what} {path} is not the certified one: its SHA-256 is {actual}, "
                          f"the report certifies `{subject['name']}` with {certified}")
    return statement


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report")
    ap.add_argument("--pubkey", action="append", required=True, metavar="PUB.pem",
                    help="a trusted public key (SPKI PEM); repeatable")
    ap.add_argument("--provider", help="the provider library file to compare")
    ap.add_argument("--golden", help="the golden vector set file to compare")
    args = ap.parse_args()
    try:
        statement = verify(args.report, args.pubkey, args.provider, args.golden)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except Refused as e:
        print(f"{args.report}: DOES NOT VERIFY: {e}")
        sys.exit(1)
    p, subjects = statement["predicate"], statement["subject"]
    print(f"signature verified; verdict {p['verdict']}: {p['component']['id']} "
          f"{p['component']['version']} at {p['tier']} on {p['provider']['name']} "
          f"({subjects[0]['name']} sha256 {subjects[0]['digest']['sha256']}), "
          f"device {p['device']['name']}, {p['run']['finished']}")
    for reason in p["reasons"]:
        print(f"  - {reason}")
    sys.exit(0 if p["verdict"] == "CERTIFIED" else 1)


if __name__ == "__main__":
    main()
