/* Emulates CPython's fix for gh-142183 in an unfixed CPython (3.11, 3.12), for overhead.py.
 *
 * CPython keeps Python frames in 16 KiB chunks, each mmapped when a call does not fit in the
 * current chunk and munmapped as soon as that call returns: a hot call that lands on a chunk
 * boundary maps, faults in and unmaps a chunk every time.  CPython 3.13 and later keep one freed
 * chunk for reuse (python/cpython#145789, March 2026).  Preloaded (LD_PRELOAD), this library does
 * the same below CPython: the last 16 KiB anonymous mapping handed out here and then unmapped is
 * kept mapped and handed out again by the next 16 KiB anonymous mmap.  Only mappings this library
 * made itself are kept (a 16 KiB munmap of part of a larger mapping passes through), and every
 * other mmap and munmap passes through unchanged.
 *
 * Build: cc -O2 -shared -fPIC -o stack_chunk_cache.so stack_chunk_cache.c -lpthread
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#define CHUNK_BYTES 16384
#define MAX_LIVE 4096 /* chunks mapped here and not yet unmapped: far more than a stack holds */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *live[MAX_LIVE];
static int live_count = 0;
static void *kept = NULL;

static void *raw_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

static int is_chunk_request(void *addr, size_t len, int prot, int flags, int fd) {
    return addr == NULL && len == CHUNK_BYTES && fd == -1 && (flags & MAP_ANONYMOUS)
        && (flags & MAP_PRIVATE) && !(flags & MAP_FIXED) && prot == (PROT_READ | PROT_WRITE);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    if (!is_chunk_request(addr, len, prot, flags, fd))
        return raw_mmap(addr, len, prot, flags, fd, off);
    pthread_mutex_lock(&lock);
    void *chunk = kept;
    kept = NULL;
    if (chunk == NULL) {
        chunk = raw_mmap(addr, len, prot, flags, fd, off);
        if (chunk != MAP_FAILED && live_count < MAX_LIVE)
            live[live_count++] = chunk;
    }
    pthread_mutex_unlock(&lock);
    return chunk;
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    return mmap(addr, len, prot, flags, fd, off);
}

int munmap(void *addr, size_t len) {
    void *release = addr;
    if (len == CHUNK_BYTES) {
        pthread_mutex_lock(&lock);
        for (int i = 0; i < live_count; i++) {
            if (live[i] == addr) {
                if (kept == NULL) { /* keep it, mapped; it stays in live[] */
                    kept = addr;
                    release = NULL;
                } else {            /* one is kept already: unmap this one for good */
                    live[i] = live[--live_count];
                }
                break;
            }
        }
        pthread_mutex_unlock(&lock);
    }
    return release == NULL ? 0 : (int)syscall(SYS_munmap, release, len);
}
