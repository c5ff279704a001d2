// The command line (issue 22): `--help` on every subcommand prints its usage
// to stdout and exits 0; `shardplan --version`; `--json` is the one spelling
// of JSON output (the older `--format json` still works).
//
// RUN: shardplan --version 2>/dev/null | FileCheck %s --check-prefix=VERSION
// RUN: shardplan --help 2>/dev/null | FileCheck %s --check-prefix=TOP
// RUN: shardplan plan --help 2>/dev/null | FileCheck %s --check-prefix=PLAN
// RUN: shardplan example --help 2>/dev/null | FileCheck %s --check-prefix=EXAMPLE
// RUN: shardplan compare --help 2>/dev/null | FileCheck %s --check-prefix=COMPARE
// RUN: shardplan token --help 2>/dev/null | FileCheck %s --check-prefix=TOKEN
// RUN: shardplan backup --help 2>/dev/null | FileCheck %s --check-prefix=BACKUP
// RUN: shardplan cost --help 2>/dev/null | FileCheck %s --check-prefix=COST
// RUN: shardplan run --help 2>/dev/null | FileCheck %s --check-prefix=USAGE
// RUN: shardplan calibrate --help 2>/dev/null | FileCheck %s --check-prefix=USAGE
// RUN: shardplan lint --help 2>/dev/null | FileCheck %s --check-prefix=USAGE
// RUN: shardplan collectives --help 2>/dev/null | FileCheck %s --check-prefix=USAGE
// RUN: shardplan sweep --help 2>/dev/null | FileCheck %s --check-prefix=USAGE
// RUN: shardplan suggest --help 2>/dev/null | FileCheck %s --check-prefix=USAGE
// RUN: shardplan whatif --help 2>/dev/null | FileCheck %s --check-prefix=USAGE
// RUN: shardplan serve --help 2>/dev/null | FileCheck %s --check-prefix=USAGE
// RUN: shardplan client --help 2>/dev/null | FileCheck %s --check-prefix=USAGE
// RUN: shardplan opt --help 2>/dev/null | FileCheck %s --check-prefix=OPT
//
// --json everywhere; --format json is the same (%t is one path per RUN line):
// RUN: shardplan example mlp --json > %t.json && shardplan example mlp --format json | cmp - %t.json
// RUN: shardplan example mlp --json > %t.json && shardplan cost %t.json --json | FileCheck %s --check-prefix=JSON
// RUN: shardplan example mlp --json > %t.json && shardplan compare %t.json %t.json --json | FileCheck %s --check-prefix=JSON
// RUN: shardplan example mlp --json > %t.json && shardplan plan %t.json --json | FileCheck %s --check-prefix=JSON
// RUN: shardplan example mlp --json > %t.json && shardplan plan %t.json --mlir | FileCheck %s --check-prefix=MLIR
// RUN: shardplan example mlp --layers 1 --d-model 64 > %t.json && shardplan run %t.json --iters 1 --json | FileCheck %s --check-prefix=RUNJSON
// RUN: shardplan calibrate --devices 2 --out %t.profile.json --json | FileCheck %s --check-prefix=CALJSON
//
// Errors under --json are JSON too (text otherwise):
// RUN: ( shardplan plan %t.missing.json --json 2>&1 >/dev/null || true ) | FileCheck %s --check-prefix=ERRJSON
// RUN: ( shardplan cost %s --profile no-such-profile --json 2>&1 >/dev/null || true ) | FileCheck %s --check-prefix=ERRJSON2
// RUN: ( shardplan plan %t.missing.json 2>&1 >/dev/null || true ) | FileCheck %s --check-prefix=ERRTEXT

// VERSION: shardplan {{[0-9]+\.[0-9]+\.[0-9]+}}
// TOP: usage: shardplan <command>
// PLAN: usage: shardplan plan
// EXAMPLE: usage: shardplan example
// COMPARE: usage: shardplan compare
// TOKEN: usage: shardplan token
// BACKUP: usage: shardplan backup
// COST: usage: shardplan cost
// USAGE: {{[Uu]}}sage
// OPT: {{.+}}
// JSON: {{^[[:space:]]*}}{
// MLIR: module
// CALJSON: {"path":"{{.*}}.profile.json","workers":2,"f32_flop_per_s":
// ERRJSON: {"error":{"command":"plan","file":"{{.*}}missing.json","code":"not found","message":"cannot open
// ERRJSON2: {"error":{"command":"cost","file":"profile","code":"not found","message":"no profile 'no-such-profile'
// ERRTEXT: shardplan plan: {{.*}}missing.json: not found: cannot open
// RUNJSON: "iter_s":[
// RUNJSON-SAME: "flops":{{[0-9]+}},
// RUNJSON-SAME: "numerics":{"match":true
