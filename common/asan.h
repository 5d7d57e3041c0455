/*
 * asan.h - VG_ASAN: 1 in a build with AddressSanitizer, else 0. Memory kept for reuse (free
 * lists of blocks, mapped blocks) is not kept under ASan: every block stays on the heap and is
 * freed, so that a use after free is caught.
 */
#ifndef VG_ASAN_H
#define VG_ASAN_H

#if defined(__SANITIZE_ADDRESS__)
#define VG_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VG_ASAN 1
#endif
#endif
#ifndef VG_ASAN
#define VG_ASAN 0
#endif

#endif
