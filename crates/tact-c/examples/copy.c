/*
 * copy.c: copies SRC to DST in 64 KiB blocks, computing the CRC-32 of the data on the way, and
 * lets tact regulate it on the bytes it copies. Under contention with more important work,
 * tact_testpoint() blocks and the copy pauses; on an idle machine it runs at full speed.
 *
 *   cc -O2 copy.c -I../include ../../../target/debug/libtact.a \
 *      -lgcc_s -lutil -lrt -lpthread -lm -ldl -o copy
 *   TACT_TESTPOINT=100ms ./copy big.iso /backup/big.iso
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tact.h"

/* Bitwise CRC-32 (IEEE, reflected): deliberately plain, so that copying costs some CPU. */
static uint32_t crc32_update(uint32_t crc, const unsigned char *p, size_t n)
{
    while (n--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return crc;
}

int main(int argc, char **argv)
{
    static unsigned char buf[64 * 1024];
    if (argc != 3) {
        fprintf(stderr, "usage: %s SRC DST\n", argv[0]);
        return 2;
    }
    FILE *in = fopen(argv[1], "rb");
    if (!in) {
        perror(argv[1]);
        return 1;
    }
    FILE *out = fopen(argv[2], "wb");
    if (!out) {
        perror(argv[2]);
        return 1;
    }
    uint32_t crc = 0xFFFFFFFFu;
    uint64_t total = 0;
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) {
        crc = crc32_update(crc, buf, n);
        if (fwrite(buf, 1, n, out) != n) {
            perror(argv[2]);
            return 1;
        }
        total += n;
        int64_t copied = (int64_t)n;
        int rc = tact_testpoint(0, 1, &copied);
        if (rc != TACT_OK) {
            fprintf(stderr, "tact_testpoint: %s (%d)\n", tact_last_error(), rc);
            return 1;
        }
    }
    if (ferror(in) || fclose(in) != 0 || fclose(out) != 0) {
        perror("copy");
        return 1;
    }
    printf("copied %llu bytes, crc32 %08x\n", (unsigned long long)total, crc ^ 0xFFFFFFFFu);
    return 0;
}
