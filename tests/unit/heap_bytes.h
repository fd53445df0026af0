/* heap_bytes.h - bytes the process has allocated with malloc and not freed,
 * for tests that bound what an object keeps (memory per connection, per
 * member). glibc's own count (mallinfo2: arena chunks in use plus mmapped
 * ones); under AddressSanitizer, whose allocator replaces glibc's, its
 * count. Header-only, test code.
 */
#ifndef HEAP_BYTES_H
#define HEAP_BYTES_H

#include <stddef.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HEAP_BYTES_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define HEAP_BYTES_ASAN 1
#endif

#ifdef HEAP_BYTES_ASAN
/* sanitizer/allocator_interface.h, declared here: gcc ships no header. */
size_t __sanitizer_get_current_allocated_bytes(void);
static inline size_t heap_bytes(void) {
  return __sanitizer_get_current_allocated_bytes();
}
#else
#include <malloc.h>
static inline size_t heap_bytes(void) {
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}
#endif

#endif
