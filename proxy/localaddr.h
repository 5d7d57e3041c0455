/*
 * localaddr.h - the addresses of the machine vaultgate runs on (every local interface, in its
 * network namespace), kept current for the destination rules (SPEC §4: "an address of the
 * machine vaultgate runs on") without reading the interface list on every dial.
 */
#ifndef VG_LOCALADDR_H
#define VG_LOCALADDR_H

#include <stddef.h>
#include <stdint.h>

struct localaddr;

/*
 * A new set, read once now. It belongs to one thread (each worker has its own). NULL when out of
 * memory; free with localaddr_free.
 */
struct localaddr *localaddr_new(void);

/* Frees *lp and NULLs it. NULL-safe. */
void localaddr_free(struct localaddr **lp);

/*
 * 1 if addr (4 or 16 bytes, network order; an IPv4-mapped IPv6 address counts as its IPv4
 * address) is an address of one of the machine's interfaces at this moment, else 0. Never
 * blocks: the kernel announces address changes on a netlink socket that this polls without
 * waiting, and the interface list is read again only after a change.
 */
int localaddr_has(struct localaddr *l, const uint8_t *addr, size_t len);

#endif
