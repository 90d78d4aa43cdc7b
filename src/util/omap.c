/* omap.c - an ordered map of u64 keys to u32 values (util.h), for lookups
 * by "the greatest key at or below": sorted runs of at most MD_ORUN keys
 * with a directory of their first keys. A full run splits in two; an empty
 * one leaves the directory. Nothing ever costs more than a few memmoves of
 * MD_ORUN entries and of the directory, in any insertion order. */
#include <stdlib.h>
#include <string.h>
#include "util.h"

/* How many of the first n keys of a are <= key. */
static size_t upto(const uint64_t *a, size_t n, uint64_t key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a[mid] <= key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void md_omap_free(md_omap *m)
{
    for (size_t i = 0; i < m->nrun; i++)
        free(m->run[i]);
    free(m->run);
    free(m->first);
    memset(m, 0, sizeof *m);
}

/* A fresh run put into the directory at i. */
static md_orun *insert_run(md_omap *m, size_t i)
{
    if (m->nrun == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 8;
        md_orun **run = realloc(m->run, cap * sizeof *run);
        if (run)
            m->run = run;
        uint64_t *first = run ? realloc(m->first, cap * sizeof *first) : NULL;
        if (!first)
            return NULL;
        m->first = first;
        m->cap = cap;
    }
    md_orun *r = malloc(sizeof *r);
    if (!r)
        return NULL;
    r->n = 0;
    memmove(m->run + i + 1, m->run + i, (m->nrun - i) * sizeof *m->run);
    memmove(m->first + i + 1, m->first + i, (m->nrun - i) * sizeof *m->first);
    m->run[i] = r;
    m->nrun++;
    return r;
}

/* Moves run i's upper half into a new run after it. */
static int split_run(md_omap *m, size_t i)
{
    md_orun *hi = insert_run(m, i + 1);
    if (!hi)
        return -1;
    md_orun *lo = m->run[i];
    uint32_t half = lo->n / 2;
    hi->n = lo->n - half;
    memcpy(hi->key, lo->key + half, hi->n * sizeof *hi->key);
    memcpy(hi->val, lo->val + half, hi->n * sizeof *hi->val);
    lo->n = half;
    m->first[i + 1] = hi->key[0];
    return 0;
}

int md_omap_put(md_omap *m, uint64_t key, uint32_t val)
{
    if (!m->nrun && !insert_run(m, 0))
        return -1;
    size_t u = upto(m->first, m->nrun, key), i = u ? u - 1 : 0;
    md_orun *r = m->run[i];
    size_t j = upto(r->key, r->n, key);
    if (j && r->key[j - 1] == key) {
        r->val[j - 1] = val;
        return 0;
    }
    if (r->n == MD_ORUN) {
        if (split_run(m, i))
            return -1;
        if (j > r->n) {
            j -= r->n;
            r = m->run[++i];
        }
    }
    memmove(r->key + j + 1, r->key + j, (r->n - j) * sizeof *r->key);
    memmove(r->val + j + 1, r->val + j, (r->n - j) * sizeof *r->val);
    r->key[j] = key;
    r->val[j] = val;
    r->n++;
    m->first[i] = r->key[0];
    m->count++;
    return 0;
}

int md_omap_del(md_omap *m, uint64_t key)
{
    size_t u = upto(m->first, m->nrun, key);
    if (!u)
        return 0;
    size_t i = u - 1;
    md_orun *r = m->run[i];
    size_t j = upto(r->key, r->n, key);
    if (!j || r->key[j - 1] != key)
        return 0;
    j--;
    memmove(r->key + j, r->key + j + 1, (r->n - j - 1) * sizeof *r->key);
    memmove(r->val + j, r->val + j + 1, (r->n - j - 1) * sizeof *r->val);
    m->count--;
    if (--r->n) {
        m->first[i] = r->key[0];
        return 1;
    }
    free(r);
    memmove(m->run + i, m->run + i + 1, (m->nrun - i - 1) * sizeof *m->run);
    memmove(m->first + i, m->first + i + 1, (m->nrun - i - 1) * sizeof *m->first);
    m->nrun--;
    return 1;
}

int md_omap_floor(const md_omap *m, uint64_t key, uint64_t *k, uint32_t *v)
{
    size_t u = upto(m->first, m->nrun, key);
    if (!u)
        return 0;
    const md_orun *r = m->run[u - 1];
    size_t j = upto(r->key, r->n, key); /* >= 1: the run's first key is <= key */
    *k = r->key[j - 1];
    *v = r->val[j - 1];
    return 1;
}
