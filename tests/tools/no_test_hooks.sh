#!/bin/sh
# no_test_hooks.sh NM PRODUCT CONTROL - the product binary defines none of the test hooks of
# ca/ca_test.h that are compiled only into the test build of the CA (-DVG_CA_TEST_HOOKS);
# CONTROL, a tool linked with that build, must define each of them, and PRODUCT must define the
# CA's ordinary functions, so an nm that sees nothing (a stripped binary, a renamed hook) fails
# here instead of passing. Exit 0 pass, 1 fail.
set -u
nm=$1 product=$2 control=$3
hooks="ca_test_root_key_hook"

syms() { # syms FILE: the defined symbol names of FILE, one a line
    "$nm" --defined-only "$1" | awk '{ print $NF }'
}
product_syms=$(syms "$product") || { echo "FAIL: $nm $product"; exit 1; }
control_syms=$(syms "$control") || { echo "FAIL: $nm $control"; exit 1; }
echo "$product_syms" | grep -qx ca_new || { echo "FAIL: no ca_new in $product: nm sees nothing"; exit 1; }
for h in $hooks; do
    if echo "$product_syms" | grep -qx "$h"; then
        echo "FAIL: $product defines the test hook $h"
        exit 1
    fi
    echo "$control_syms" | grep -qx "$h" || { echo "FAIL: control $control lacks $h"; exit 1; }
done
echo "ok: $product defines none of: $hooks"
