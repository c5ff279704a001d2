// Every pass `shardplan opt -help` lists is documented on
// docs/propagation.md or docs/partitioner.md.
// RUN: shardplan opt -help 2>&1 | grep -oE -- '^  -(sdy|shardplan)-[a-z-]+' | tr -d ' ' | sort -u > %t.passes && \
// RUN:   cat %S/../../docs/propagation.md %S/../../docs/partitioner.md | grep -o -- '`-[a-z][a-z-]*' | tr -d '`' | sort -u > %t.docs && \
// RUN:   comm -23 %t.passes %t.docs > %t.missing && \
// RUN:   { test ! -s %t.missing || { echo "undocumented passes:"; cat %t.missing; false; }; }
