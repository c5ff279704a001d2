#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Writes the MPI tests' collective module (tests/mpi/run.sh): on a mesh
# ["a"=2, "b"=2, "c"=2] of 8 devices (device = 4a + 2b + c), every
# collective over axis sets whose groups stay inside a host, cross hosts, or
# are mixed (part of a group local, part remote), for both layouts the test
# runs (2 hosts x 4 devices: a crosses, b and c stay; 4 hosts x 2: a and b
# cross, c stays; {a, c} and {b, c} are mixed). Each case reads its own
# argument and returns its own result, so one run checks them all against
# the one-device reference.
# With --one, the same cases on a mesh ["a"=2] for 2 hosts x 1 device, where
# each group has one member per host (the direct MPI calls of ex_mpi.c).
import sys

R, K, C = 16, 24, 24
ONE = "--one" in sys.argv
AXES = [["a"]] if ONE else [["c"], ["a"], ["b"], ["a", "c"], ["b", "c"], ["a", "b", "c"]]


def q(axes):
    return ", ".join('"%s"' % a for a in axes)


def ty(r, c, e="f32"):
    return "tensor<%dx%dx%s>" % (r, c, e)


args, body, rets = [], [], []


def arg(shape, sharding):
    n = len(args)
    args.append("%%arg%d: %s {sdy.sharding = #sdy.sharding<@mesh, %s>}" % (n, shape, sharding))
    return "%%arg%d" % n


def ret(v, shape):
    rets.append((v, shape))


vid = [0]


def val():
    vid[0] += 1
    return "%%v%d" % vid[0]


for axes in AXES:
    A = q(axes)
    # all_gather: dim 0 sharded over axes, gathered
    x = arg(ty(R, C), "[{%s}, {}]" % A)
    v = val()
    body.append("  %s = sdy.all_gather [{%s}, {}] %s out_sharding=<@mesh, [{}, {}]> : %s"
                % (v, A, x, ty(R, C)))
    ret(v, ty(R, C))
    # all_slice
    x = arg(ty(R, C), "[{}, {}]")
    v = val()
    body.append("  %s = sdy.all_slice [{%s}, {}] %s out_sharding=<@mesh, [{%s}, {}]> : %s"
                % (v, A, x, A, ty(R, C)))
    ret(v, ty(R, C))
    # all_to_all dim 0 -> dim 1
    x = arg(ty(R, C), "[{%s}, {}]" % A)
    v = val()
    body.append("  %s = sdy.all_to_all [{%s}: 0->1] %s out_sharding=<@mesh, [{}, {%s}]> : %s"
                % (v, A, x, A, ty(R, C)))
    ret(v, ty(R, C))
    # a dot contracting over axes: a partial sum, then all_reduce / reduce_scatter
    for op in ("all_reduce", "reduce_scatter"):
        l = arg(ty(R, K), "[{}, {%s}]" % A)
        r = arg(ty(K, C), "[{%s}, {}]" % A)
        d = val()
        body.append("  %s = stablehlo.dot_general %s, %s, contracting_dims = [1] x [0] "
                    "{sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {}]>]>} : (%s, %s) -> %s"
                    % (d, l, r, ty(R, K), ty(K, C), ty(R, C)))
        v = val()
        if op == "all_reduce":
            body.append("  %s = sdy.all_reduce {%s} %s out_sharding=<@mesh, [{}, {}]> : %s"
                        % (v, A, d, ty(R, C)))
        else:
            body.append("  %s = sdy.reduce_scatter [{}, {%s}] %s out_sharding=<@mesh, [{}, {%s}]> : %s"
                        % (v, A, d, A, ty(R, C)))
        ret(v, ty(R, C))
    # max, min and product reductions over a dimension sharded on axes, then
    # their all_reduce (which combines by the partials' kind)
    for body_op, init in (("maximum", "0xFF800000"), ("minimum", "0x7F800000"),
                          ("multiply", "1.0")):
        x = arg(ty(R, C), "[{}, {%s}]" % A)
        i = val()
        body.append("  %s = stablehlo.constant dense<%s> : tensor<f32>" % (i, init))
        m = val()
        body.append("  %s = stablehlo.reduce(%s init: %s) applies stablehlo.%s across "
                    "dimensions = [1] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}]>]>} : "
                    "(%s, tensor<f32>) -> tensor<%dxf32>" % (m, x, i, body_op, ty(R, C), R))
        v = val()
        body.append("  %s = sdy.all_reduce {%s} %s out_sharding=<@mesh, [{}]> : tensor<%dxf32>"
                    % (v, A, m, R))
        ret(v, "tensor<%dxf32>" % R)

# collective permutes: the order of two axes on one dimension swapped
for a, b in () if ONE else (("a", "c"), ("b", "c"), ("a", "b")):
    x = arg(ty(R, C), '[{"%s", "%s"}, {}]' % (a, b))
    v = val()
    body.append('  %s = sdy.collective_permute %s out_sharding=<@mesh, [{"%s", "%s"}, {}]> : %s'
                % (v, x, b, a, ty(R, C)))
    ret(v, ty(R, C))

out = sys.stdout
out.write('sdy.mesh @mesh = <["a"=2]>\n' if ONE else 'sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>\n')
out.write("func.func @main(%s) -> (%s) {\n" % (", ".join(args), ", ".join(s for _, s in rets)))
out.write("\n".join(body) + "\n")
out.write("  return %s : %s\n}\n" % (", ".join(v for v, _ in rets), ", ".join(s for _, s in rets)))
