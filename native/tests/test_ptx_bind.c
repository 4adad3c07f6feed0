/* Tests of binding (ptxinj_render with PTXINJ_RENDER_BIND, "BINDING" in ptx_inject.h): a
   qualifying copy frame "{ .reg; mov in; BEGIN..END; mov out; }" is replaced by the stub with
   each "%<reg>" token rewritten to its operand, wrapped in "\t{\n" ... "\t}\n" unless the stub
   is one "{ ... }" block; every other instance renders as without the flag. Operands must be
   typed: the PTX declares their "%<prefix><N>" ranges with the variables' regtypes (DECL). Run with
   `make -C native test` (ASan + UBSan). Every PTX text is an exact-size heap copy without NUL,
   parse memory is exactly mem_needed bytes at an odd address, and every render is measured,
   tried one byte short (must write nothing) and filled into an exact-size buffer. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx_inject.h"
#include "check.h"
#include "parsed.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(uint32_t n)   /* xorshift64* */
{
    g_rng ^= g_rng >> 12; g_rng ^= g_rng << 25; g_rng ^= g_rng >> 27;
    return (uint32_t)((g_rng * 2685821657736338717ull) >> 33) % (n ? n : 1);
}

/* Render with stubs[i] for site i (NULL: no stub, PTXINJ_NO_STUB in PAIRS mode). Measures,
   checks that one byte less gives BUFFER_TOO_SMALL with *out_len = needed and nothing written,
   fills an exact-size buffer. Returns a NUL-terminated copy (free it) and its length, or NULL
   after printing what went wrong. */
static int g_render_bad;
static char *rend(const parsed *p, const char *const *stubs, uint32_t flags, size_t *len)
{
    sb blob = {0, 0, 0};
    uint32_t i, ns = p->ctx.n_sites, *offs = (uint32_t *)calloc((size_t)ns * 2 + 1, sizeof(uint32_t));
    size_t need = 0, got = 0, k;
    const char *bp;
    char *buf, *copy = NULL;
    ptxinj_status st;
    int ok;
    for (i = 0; i < ns; i++) {
        const char *s = stubs ? stubs[i] : NULL;
        if (flags & PTXINJ_RENDER_PAIRS) {
            offs[2 * i] = s ? (uint32_t)blob.n : PTXINJ_NO_STUB;
            offs[2 * i + 1] = s ? (uint32_t)strlen(s) : 0;
        } else {
            offs[i] = (uint32_t)blob.n;
        }
        if (s) sb_puts(&blob, s);
    }
    if (!(flags & PTXINJ_RENDER_PAIRS)) offs[ns] = (uint32_t)blob.n;
    bp = blob.p ? blob.p : "";
    st = ptxinj_render(&p->ctx, bp, blob.n, offs, flags, NULL, 0, &need);
    ok = st == PTXINJ_OK;
    if (ok && need) {
        size_t short_len = 0;
        buf = (char *)malloc(need);                     /* only need - 1 bytes may be touched */
        memset(buf, 0x5A, need);
        st = ptxinj_render(&p->ctx, bp, blob.n, offs, flags, buf, need - 1, &short_len);
        ok = st == PTXINJ_ERR_BUFFER_TOO_SMALL && short_len == need;
        for (k = 0; k < need; k++) ok &= buf[k] == 0x5A;
        free(buf);
    }
    if (ok) {
        buf = (char *)malloc(need ? need : 1);
        st = ptxinj_render(&p->ctx, bp, blob.n, offs, flags, buf, need, &got);
        ok = st == PTXINJ_OK && got == need;
        if (ok) {
            copy = (char *)malloc(need + 1);
            if (need) memcpy(copy, buf, need);
            copy[need] = 0;
        }
        free(buf);
    }
    if (!ok && ++g_render_bad <= 3)
        printf("  [%s] render flags %u: status %d, measured %zu, filled %zu\n", g_test, flags, (int)st, need, got);
    if (len) *len = need;
    free(blob.p);
    free(offs);
    return copy;
}

static int same(const char *got, const char *want)
{
    if (got && strcmp(got, want) == 0) return 1;
    printf("  [%s] want:\n%s\n  got:\n%s\n", g_test, want, got ? got : "(null)");
    return 0;
}

/* ptx (sites in first-appearance order, stubs per site) renders to want with BIND, untagged,
   and to want_tag with BIND|TAG (when not NULL); prefix-sum and PAIRS layouts alike. */
static void expect_bound(const char *ptx, const char *const *stubs, const char *want, const char *want_tag)
{
    parsed p = parse_s(ptx);
    int pairs;
    CHECK(p.st == PTXINJ_OK);
    for (pairs = 0; pairs < 2 && p.st == PTXINJ_OK; pairs++) {
        uint32_t f = PTXINJ_RENDER_BIND | (pairs ? PTXINJ_RENDER_PAIRS : 0);
        char *r = rend(&p, stubs, f, NULL);
        CHECK(same(r, want));
        free(r);
        if (!want_tag) continue;
        r = rend(&p, stubs, f | PTXINJ_RENDER_TAG, NULL);
        CHECK(same(r, want_tag));
        free(r);
    }
    parsed_free(&p);
}

/* BIND changes nothing: equal to the render without it, tagged or not, in both layouts. */
static void expect_plain(const char *ptx, const char *const *stubs)
{
    parsed p = parse_s(ptx);
    uint32_t f;
    CHECK(p.st == PTXINJ_OK);
    for (f = 0; f < 4 && p.st == PTXINJ_OK; f++) {
        char *a = rend(&p, stubs, f, NULL), *b = rend(&p, stubs, f | PTXINJ_RENDER_BIND, NULL);
        CHECK(a && same(b, a));
        free(a);
        free(b);
    }
    parsed_free(&p);
}

/* ---- fixtures ----------------------------------------------------------------------------- */

/* The function-level register ranges NVRTC writes: binding needs every operand's prefix
   declared with its variable's regtype (operand types, see BINDING), anywhere in the PTX. */
#define DECL "\t.reg .pred \t%p<3>;\n\t.reg .b32 \t%r<32>;\n\t.reg .f32 \t%f<4000>;\n" \
             "\t.reg .b64 \t%rd<52>;\n\t.reg .f64 \t%fd<9>;\n"
#define PRE0 "\tld.global.f32 %f321, [%rd1];\n"
#define PRE  DECL PRE0
#define POST "\tst.global.f32 [%rd1], %f3440;\n\tret;\n"
#define OPEN "\t{\n"
#define DA   "\t.reg .f32 %v_a;\n"
#define DACC "\t.reg .f32 %v_acc;\n"
#define MA   "\tmov.f32 %v_a, %f321;\n"
#define MACC "\tmov.f32 %v_acc, %f3440;\n"
#define BLK  "\t// PTX_INJECT_BEGIN mac\n\t// PTX_INJECT_VAR in f32 f32 v_a a\n" \
             "\t// PTX_INJECT_VAR mod f32 f32 v_acc acc\n\t// PTX_INJECT_END\n"
#define BACK "\tmov.f32 %f3440, %v_acc;\n"
#define CLOSE "\t}\n"
#define FRAME OPEN DA DACC MA MACC BLK BACK CLOSE
/* a site with one out variable, and one with none */
#define FRAME_O(op) OPEN "\t.reg .f32 %v_o;\n\t// PTX_INJECT_BEGIN o\n\t// PTX_INJECT_VAR out f32 f32 v_o o\n" \
                    "\t// PTX_INJECT_END\n\tmov.f32 " op ", %v_o;\n" CLOSE
#define FRAME_Z OPEN "\t// PTX_INJECT_BEGIN z\n\t// PTX_INJECT_END\n" CLOSE
#define TAG(site, body) "\t// PTX_INJECT_STUB " site "\n" body "\n\t// PTX_INJECT_STUB_END\n"

/* the scope a bound stub gets when it is not one brace block (literal expectations) */
#define WRAP(body) "\t{\n" body "\t}\n"

/* Is stub s[0, n) one brace block "{ ... }" (blanks and newlines around it, braces in "//"
   comments not counted)? Written apart from the header's scan: the first '{' must close
   exactly at the last non-blank byte. */
static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' || c == '\n'; }
static int one_block(const char *s, size_t n)
{
    size_t a = 0, i;
    int depth = 0;
    while (a < n && is_blank(s[a])) a++;
    while (n > a && is_blank(s[n - 1])) n--;
    if (a == n || s[a] != '{') return 0;
    for (i = a; i < n; i++) {
        if (s[i] == '/' && i + 1 < n && s[i + 1] == '/') {
            while (i < n && s[i] != '\n') i++;   /* the comment, up to its newline */
        } else if (s[i] == '{') {
            depth++;
        } else if (s[i] == '}' && --depth == 0) {
            return i == n - 1;
        }
    }
    return 0;
}

/* What a bound instance of stub[0, n) (body: the stub with its registers rewritten) renders
   to, as the header documents it: [scope] [tag line] body [newline | tag end line] [scope],
   the scope lines when the stub is not one block and is non-empty or tagged. */
static void put_bound(sb *out, const char *site, const char *stub, size_t n, const char *body, size_t bn, int tag)
{
    int scope = !one_block(stub, n) && (tag || n);
    if (scope) sb_puts(out, "\t{\n");
    if (tag) sb_printf(out, "\t// PTX_INJECT_STUB %s\n", site);
    sb_put(out, body, bn);
    if (tag) sb_puts(out, "\n\t// PTX_INJECT_STUB_END\n");
    else if (n && stub[n - 1] != '\n') sb_puts(out, "\n");
    if (scope) sb_puts(out, "\t}\n");
}

/* one-site PTX pre + frame + post whose stub binds to `bound` (the stub rewritten; the
   untagged and tagged outputs are checked as the header documents them), or renders plain
   (bound == NULL) */
static void bind_in(const char *pre, const char *frame, const char *post, const char *site, const char *stub,
                    const char *bound)
{
    sb ptx = {0, 0, 0}, want = {0, 0, 0}, tag = {0, 0, 0};
    const char *stubs[1];
    size_t n = strlen(stub);
    stubs[0] = stub;
    sb_puts(&ptx, pre); sb_puts(&ptx, frame); sb_puts(&ptx, post);
    if (bound) {
        sb_puts(&want, pre); put_bound(&want, site, stub, n, bound, strlen(bound), 0); sb_puts(&want, post);
        sb_puts(&tag, pre); put_bound(&tag, site, stub, n, bound, strlen(bound), 1); sb_puts(&tag, post);
        expect_bound(ptx.p, stubs, want.p, tag.p);
    } else {
        expect_plain(ptx.p, stubs);
    }
    free(ptx.p); free(want.p); free(tag.p);
}
static void bind1(const char *frame, const char *site, const char *stub, const char *bound)
{
    bind_in(PRE, frame, POST, site, stub, bound);
}
static void plain1(const char *frame, const char *stub)
{
    bind_in(PRE, frame, POST, "", stub, NULL);
}

/* ---- 1. basic shapes ---------------------------------------------------------------------- */

static void zero_stack(void)   /* leaves zeros where render's locals will lie */
{
    volatile char junk[16384];
    size_t i;
    for (i = 0; i < sizeof junk; i++) junk[i] = 0;
}

static void test_basic(void)
{
    const char *mac[1] = {"fma.rn.f32 %v_acc, %v_a, %v_a, %v_acc;\n"};
    const char *two[2] = {"add.f32 %v_acc, %v_acc, %v_a;", "mov.f32 %v_o, 0f3F800000;\n"};
    const char *zero[1] = {"bar.sync 0;"};
    const char *empty[1] = {""};
    const char *nostub[2] = {NULL, "mov.f32 %v_o, %f1;"};
    const char *mac_stub = "fma.rn.f32 %f3440, %f321, %f321, %f3440;\n";
    g_test = "basic";
    expect_bound(PRE FRAME POST, mac, PRE WRAP("fma.rn.f32 %f3440, %f321, %f321, %f3440;\n") POST,
                 PRE WRAP(TAG("mac", "fma.rn.f32 %f3440, %f321, %f321, %f3440;\n")) POST);
    /* lines in any order, other indentation, CRLF, "}" at EOF without a newline */
    bind1("{\n  mov.f32 %v_acc, %f3440;\n.reg .f32 %v_acc;\r\n\t\tmov.f32 %v_a,%f321 ;\n  .reg  .f32\t%v_a;  \n" BLK
          "mov.f32 %f3440, %v_acc;\r\n  }  \r\n", "mac", mac[0], mac_stub);
    expect_bound(DECL OPEN DA DACC MA MACC BLK BACK "\t}", mac, DECL WRAP("fma.rn.f32 %f3440, %f321, %f321, %f3440;\n"),
                 DECL WRAP(TAG("mac", "fma.rn.f32 %f3440, %f321, %f321, %f3440;\n")));
    bind1(FRAME_O("%f7"), "o", "mov.f32 %v_o, 0f3F800000;", "mov.f32 %f7, 0f3F800000;");
    bind1(FRAME_Z, "z", "bar.sync 0;", "bar.sync 0;");
    /* no variables, no operands: binds without any register declaration */
    expect_bound("a\n" FRAME_Z "b\n" FRAME_Z "c\n", zero, "a\n" WRAP("bar.sync 0;\n") "b\n" WRAP("bar.sync 0;\n") "c\n",
                 "a\n" WRAP(TAG("z", "bar.sync 0;")) "b\n" WRAP(TAG("z", "bar.sync 0;")) "c\n");
    /* several instances with their own operands, two sites interleaved */
    expect_bound(DECL FRAME FRAME_O("%f7")
                 "\t{\n\t.reg .f32 %v_acc;\n\t.reg .f32 %v_a;\n\tmov.f32 %v_a, %f5;\n\tmov.f32 %v_acc, %f6;\n" BLK
                 "\tmov.f32 %f6, %v_acc;\n\t}\n\tnop;\n" FRAME_O("%f8") FRAME,
                 two,
                 DECL WRAP("add.f32 %f3440, %f3440, %f321;\n") WRAP("mov.f32 %f7, 0f3F800000;\n")
                 WRAP("add.f32 %f6, %f6, %f5;\n") "\tnop;\n"
                 WRAP("mov.f32 %f8, 0f3F800000;\n") WRAP("add.f32 %f3440, %f3440, %f321;\n"),
                 DECL WRAP(TAG("mac", "add.f32 %f3440, %f3440, %f321;")) WRAP(TAG("o", "mov.f32 %f7, 0f3F800000;\n"))
                 WRAP(TAG("mac", "add.f32 %f6, %f6, %f5;")) "\tnop;\n" WRAP(TAG("o", "mov.f32 %f8, 0f3F800000;\n"))
                 WRAP(TAG("mac", "add.f32 %f3440, %f3440, %f321;")));
    /* empty stub and missing stub (PAIRS + NO_STUB): the whole frame goes, untagged without a
       trace; tagged, the (empty) tag lines keep the scope lines around them */
    expect_bound(PRE FRAME POST, empty, PRE POST, PRE WRAP(TAG("mac", "")) POST);
    {
        parsed p = parse_s(PRE FRAME FRAME_O("%f7") POST);
        char *r = rend(&p, nostub, PTXINJ_RENDER_BIND | PTXINJ_RENDER_PAIRS, NULL);
        CHECK(p.st == PTXINJ_OK && same(r, PRE WRAP("mov.f32 %f7, %f1;\n") POST));
        free(r);
        r = rend(&p, nostub, PTXINJ_RENDER_BIND | PTXINJ_RENDER_PAIRS | PTXINJ_RENDER_TAG, NULL);
        CHECK(same(r, PRE WRAP(TAG("mac", "")) WRAP(TAG("o", "mov.f32 %f7, %f1;")) POST));
        free(r);
        r = rend(&p, NULL, PTXINJ_RENDER_BIND | PTXINJ_RENDER_PAIRS, NULL);
        CHECK(same(r, PRE POST));
        free(r);
        parsed_free(&p);
    }
    {   /* the measure is exact and one byte short is refused, by hand as well */
        parsed p = parse_s(PRE FRAME POST);
        const char *blob = mac[0], *want = PRE WRAP("fma.rn.f32 %f3440, %f321, %f321, %f3440;\n") POST;
        uint32_t offs[2];
        size_t need = 0, n = 0;
        char buf[256];
        offs[0] = 0; offs[1] = (uint32_t)strlen(blob);
        CHECK(ptxinj_render(&p.ctx, blob, offs[1], offs, PTXINJ_RENDER_BIND, NULL, 0, &need) == PTXINJ_OK);
        CHECK(need == strlen(want));
        memset(buf, 'Z', sizeof buf);
        CHECK(ptxinj_render(&p.ctx, blob, offs[1], offs, PTXINJ_RENDER_BIND, buf, need - 1, &n) ==
              PTXINJ_ERR_BUFFER_TOO_SMALL && n == need && buf[0] == 'Z' && buf[need - 1] == 'Z');
        CHECK(need == strlen(want) && need < sizeof buf &&
              ptxinj_render(&p.ctx, blob, offs[1], offs, PTXINJ_RENDER_BIND, buf, sizeof buf, &n) ==
              PTXINJ_OK && n == need && buf[need] == 'Z' && memcmp(buf, want, need) == 0);
        parsed_free(&p);
    }
    {   /* blob == NULL (blob_len 0, all stubs empty or missing): the stub cache starts empty
           whatever the stack holds (was: si.n / si.site read uninitialised) */
        parsed p = parse_s(PRE FRAME POST);
        static const struct { uint32_t flags, offs[2]; const char *want; } cases[] = {
            {PTXINJ_RENDER_BIND, {0, 0}, PRE POST},
            {PTXINJ_RENDER_BIND | PTXINJ_RENDER_TAG, {0, 0}, PRE WRAP(TAG("mac", "")) POST},
            {PTXINJ_RENDER_BIND | PTXINJ_RENDER_PAIRS, {PTXINJ_NO_STUB, 0}, PRE POST},
            {PTXINJ_RENDER_BIND | PTXINJ_RENDER_PAIRS, {0, 0}, PRE POST},
            {PTXINJ_RENDER_BIND | PTXINJ_RENDER_PAIRS | PTXINJ_RENDER_TAG, {PTXINJ_NO_STUB, 0},
             PRE WRAP(TAG("mac", "")) POST},
        };
        size_t k;
        CHECK(p.st == PTXINJ_OK);
        for (k = 0; k < sizeof cases / sizeof cases[0] && p.st == PTXINJ_OK; k++) {
            char buf[512];
            size_t need = 0, n = 0, wl = strlen(cases[k].want);
            zero_stack();
            CHECK(ptxinj_render(&p.ctx, NULL, 0, cases[k].offs, cases[k].flags, NULL, 0, &need) == PTXINJ_OK);
            CHECK(need == wl);
            zero_stack();
            memset(buf, 'Z', sizeof buf);
            CHECK(ptxinj_render(&p.ctx, NULL, 0, cases[k].offs, cases[k].flags, buf, sizeof buf, &n) == PTXINJ_OK);
            CHECK(n == wl && wl < sizeof buf && memcmp(buf, cases[k].want, wl) == 0 && buf[wl] == 'Z');
        }
        parsed_free(&p);
    }
}

/* ---- 2. token boundaries ------------------------------------------------------------------ */

static void test_tokens(void)
{
    g_test = "tokens";
    bind1(FRAME, "mac", "add.f32 %v_acc, %v_ab, %v_a$x;\nadd.f32 %v_acc, %v_acc, %v_a",
          "add.f32 %f3440, %v_ab, %v_a$x;\nadd.f32 %f3440, %f3440, %f321");
    bind1(FRAME, "mac", "mov.b64 %rd2, {%v_a,%v_acc};\nadd.f32 %v_acc, %v_acc|%v_a]%v_a.x %v_a_ %v_aA %v_a9 %%v_a",
          "mov.b64 %rd2, {%f321,%f3440};\nadd.f32 %f3440, %f3440|%f321]%f321.x %v_a_ %v_aA %v_a9 %%f321");
    bind1(FRAME, "mac", "st.global.f32 [%rd1], %v_a", "st.global.f32 [%rd1], %f321");
    bind1(FRAME, "mac", "mov.f32 %v_acc, %v_acc\n", "mov.f32 %f3440, %f3440\n");
    bind1(FRAME, "mac", "add.f32 %v_acc, %v_acc, v_a; // %v_a\n", "add.f32 %f3440, %f3440, v_a; // %f321\n");
}

/* ---- 3. the rules: frames that keep the plain rendering ----------------------------------- */

#define IO_BLK "\t// PTX_INJECT_BEGIN io\n\t// PTX_INJECT_VAR in f32 f32 v_a a\n" \
               "\t// PTX_INJECT_VAR out f32 f32 v_o o\n\t// PTX_INJECT_END\n"
static void test_frame_rules(void)
{
    const char *stub = "add.f32 %v_acc, %v_acc, %v_a;\n";
    static const char *const bad[] = {
        OPEN "\t.reg .f32 %_x0;\n\tmov.f32 %_x0, %f321;\n\t// PTX_INJECT_START leg\n\t// _x0 i f32 F32 x\n"
        "\t// PTX_INJECT_END\n" CLOSE,                                   /* mm-ptx START block */
        OPEN DACC MA MACC BLK BACK CLOSE,                                /* no .reg for v_a */
        OPEN "\t.reg .b32 %v_a;\n" DACC MA MACC BLK BACK CLOSE,         /* wrong regtype */
        OPEN DA DA DACC MA MACC BLK BACK CLOSE,                          /* declared twice */
        OPEN DA DACC MA MA MACC BLK BACK CLOSE,                          /* copied in twice */
        OPEN DA DACC MACC BLK BACK CLOSE,                                /* in not copied */
        OPEN DA DACC MA MACC BLK CLOSE,                                  /* mod not copied back */
        OPEN DA DACC MA MACC BLK BACK BACK CLOSE,                        /* copied back twice */
        OPEN DA DACC MA MACC BLK BACK "\tmov.f32 %f9, %v_a;\n" CLOSE,   /* in copied out */
        OPEN DA DACC MA MACC "\tadd.f32 %f1, %f2, %f3;\n" BLK BACK CLOSE,   /* unrelated line */
        OPEN DA DACC MA MACC BLK BACK "\tadd.f32 %f1, %f2, %f3;\n" CLOSE,
        OPEN DA DACC MA MACC "\n" BLK BACK CLOSE,                        /* blank lines */
        OPEN DA "\t\n" DACC MA MACC BLK BACK CLOSE,
        OPEN DA DACC MA MACC BLK "\n" BACK CLOSE,
        DA DACC MA MACC BLK BACK CLOSE,                                  /* no "{" */
        OPEN DA DACC MA MACC BLK BACK,                                   /* no "}" */
        "\t{ // scope\n" DA DACC MA MACC BLK BACK CLOSE,                 /* decorated braces */
        OPEN DA DACC MA MACC BLK BACK "\t};\n",
        OPEN DA DACC MA "\tmov.f32 %v_acc, %f3440; // x\n" BLK BACK CLOSE,
        OPEN "\t.reg .f32 %v_a, %v_acc;\n" MA MACC BLK BACK CLOSE,       /* one .reg line for two */
        OPEN DA DACC MA MACC BLK "\tmov.f32 %f3441, %v_acc;\n" CLOSE,   /* mod back elsewhere */
        OPEN DA DACC "\tmov.f32 %v_a, 0f3F800000;\n" MACC BLK BACK CLOSE,   /* immediates */
        OPEN DA DACC MA "\tmov.f32 %v_acc, 0f00000000;\n" BLK "\tmov.f32 0f00000000, %v_acc;\n" CLOSE,
        OPEN DA DACC "\tmov.u32 %v_a, %tid.x;\n" MACC BLK BACK CLOSE,      /* not "%" + identifier */
        OPEN DA DACC "\tmov.f32 %v_a, [%rd1];\n" MACC BLK BACK CLOSE,
        OPEN DA DACC "\tmov.f32 %v_a, %f321 %f2;\n" MACC BLK BACK CLOSE,    /* not a plain mov */
        OPEN DA DACC "\tmov.f32 %v_a %f321;\n" MACC BLK BACK CLOSE,
        OPEN DA DACC "\tmov.f32 %v_a, %v_acc;\n" MACC BLK BACK CLOSE,      /* operand = variable */
        OPEN DA DACC MA "\tmov.f32 %v_acc, %f321;\n" BLK "\tmov.f32 %f321, %v_acc;\n" CLOSE,   /* mod = in */
        /* out operand = in operand; a duplicate .reg within the line budget; two outs to one operand */
        OPEN DA "\t.reg .f32 %v_o;\n" MA IO_BLK "\tmov.f32 %f321, %v_o;\n" CLOSE,
        OPEN DA "\t.reg .f32 %v_o;\n" DA MA IO_BLK "\tmov.f32 %f9, %v_o;\n" CLOSE,
        OPEN "\t.reg .f32 %v_o;\n\t.reg .f32 %v_p;\n\t// PTX_INJECT_BEGIN oo\n\t// PTX_INJECT_VAR out f32 f32 v_o o\n"
        "\t// PTX_INJECT_VAR out f32 f32 v_p p\n\t// PTX_INJECT_END\n\tmov.f32 %f9, %v_o;\n\tmov.f32 %f9, %v_p;\n" CLOSE,
    };
    size_t i;
    g_test = "frame_rules";
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) plain1(bad[i], stub);
    /* positive controls next to the rules: two in variables may share an operand; a mov's type
       suffix is not compared */
    bind1(OPEN DA "\t.reg .f32 %v_b;\n\t.reg .f32 %v_o;\n" MA "\tmov.f32 %v_b, %f321;\n"
          "\t// PTX_INJECT_BEGIN ii\n\t// PTX_INJECT_VAR in f32 f32 v_a a\n\t// PTX_INJECT_VAR in f32 f32 v_b b\n"
          "\t// PTX_INJECT_VAR out f32 f32 v_o o\n\t// PTX_INJECT_END\n\tmov.f32 %f9, %v_o;\n" CLOSE,
          "ii", "add.f32 %v_o, %v_a, %v_b;", "add.f32 %f9, %f321, %f321;");
    bind1(OPEN DA DACC "\tmov.b32 %v_a, %f321;\n" MACC BLK BACK CLOSE, "mac", stub, "add.f32 %f3440, %f3440, %f321;\n");
    bind1(OPEN DA "\t.reg .f32 %v_o;\n" MA IO_BLK "\tmov.f32 %f9, %v_o;\n" CLOSE, "io", "add.f32 %v_o, %v_a, %v_a;",
          "add.f32 %f9, %f321, %f321;");
}

/* n variables: in v0..v(n-2) from %f100.., out v(n-1) to %f999 */
static void many_vars(int n, int want_bound)
{
    sb ptx = {0, 0, 0}, stub = {0, 0, 0}, want = {0, 0, 0};
    const char *stubs[1];
    int j;
    sb_puts(&ptx, DECL "\t{\n");
    for (j = n - 1; j >= 0; j--) sb_printf(&ptx, "\t.reg .f32 %%v%d;\n", j);
    for (j = 0; j < n - 1; j++) sb_printf(&ptx, "\tmov.f32 %%v%d, %%f%d;\n", j, 100 + j);
    sb_puts(&ptx, "\t// PTX_INJECT_BEGIN wide\n");
    for (j = 0; j < n; j++) sb_printf(&ptx, "\t// PTX_INJECT_VAR %s f32 f32 v%d x%d\n", j == n - 1 ? "out" : "in", j, j);
    sb_printf(&ptx, "\t// PTX_INJECT_END\n\tmov.f32 %%f999, %%v%d;\n\t}\n", n - 1);
    sb_printf(&stub, "add.f32 %%v%d, %%v0, %%v%d;\n", n - 1, n - 2);
    sb_printf(&want, "add.f32 %%f999, %%f100, %%f%d;\n", 100 + n - 2);
    stubs[0] = stub.p;
    if (want_bound) {
        sb wrapped = {0, 0, 0};
        sb_puts(&wrapped, DECL);   /* DECL holds '%': no format string */
        sb_printf(&wrapped, "\t{\n%s\t}\n", want.p);
        expect_bound(ptx.p, stubs, wrapped.p, NULL);
        free(wrapped.p);
    } else {
        expect_plain(ptx.p, stubs);
    }
    free(ptx.p); free(stub.p); free(want.p);
}

static void test_stub_rules(void)
{
    static const char *const bad[] = {
        ".reg .f32 %f321;\nadd.f32 %v_acc, %v_acc, %v_a;",      /* declares an operand */
        "{\n.reg .f32 %f<400>;\nadd.f32 %v_acc, %v_acc, %v_a;\n}",   /* a range over %f321 */
        ".reg .f32 %f<2>;",                                      /* the range size is not looked at */
        ".reg .f32 %t, %f3440;",
        "{ .reg .f32 %v_a; mov.f32 %v_a, 0f00000000; }",          /* redeclares a variable */
        ".reg .f32 %v_acc<2>;",
        "mov.f32 %v_a, 0f00000000;",                              /* writes the in variable */
        "add.f32 %v_acc, %v_acc, %v_a;\n@%p1 mov.f32 %v_a, 0f00000000;",
        "@!%p1 mov.f32\t%v_a, 0f00000000;",
        "L1: add.f32 %v_a, %v_a, %v_a;",
        "L1:\n\tadd.f32 %v_a, %v_a, %v_a;",
        "mov.b64 {%v_a, %t}, %rd1;",
        "mov.b64 {%t,%v_a}, %rd1;",
        "setp.lt.f32 %p1|%v_a, %v_acc, 0f00000000;",
        "mov.f32\n%v_a,\n0f00000000;",
        /* the opcode ends at the first byte not in [A-Za-z0-9_$.:]: a destination glued to it */
        "mov.f32%v_a, 0f3F800000;\nadd.f32 %v_acc, %v_acc, %v_a;",
        "mov.b64{%v_a, %v_acc}, %rd1;",
        "@%p1 mov.f32%v_a, %v_acc;",
        "L1:mov.f32%v_a, %v_acc;",
        "mov.b64{%v_acc,%v_a}, %rd1;",
        "ld.shared::cta.f32 %v_a, [%rd1];",                       /* "::" inside the opcode */
        "ld.shared::cta.f32%v_a, [%rd1];",
        "ld.shared::cta.v2.f32 {%v_acc, %v_a}, [%rd1];",
        /* a '%' name equal to an operand register, anywhere (the operands are %f321, %f3440) */
        "add.f32 %f321, %v_a, %v_a;",                             /* writes the in operand */
        "add.f32 %v_acc, %v_acc, %f321;",                         /* reads it behind v_a's back */
        "mov.f32 %f3440, %v_a;",
        "add.f32 %v_acc, %v_acc, %v_a;\n// keeps %f3440 live\n",  /* in a comment too */
        "{\n.reg .f32 %t;\nmov.f32 %t, %f321;\nadd.f32 %v_acc, %t, %v_a;\n}\n",
        "add.f32 %v_acc, %v_acc, %v_a; // %f<4> are the template's",   /* a range covering one */
        "add.f32 %v_acc, %v_acc, %v_a; // %f32<2>",                   /* %f32 + "1" */
        "add.f32 %v_acc, %v_acc, %v_a; // %f344<1>",                  /* %f344 + "0" */
        "{\n.reg .f32 %f3440<2>;\nmov.f32 %v_acc, %v_a;\n}",       /* the name before '<' is one */
        "/* c */ add.f32 %v_acc, %v_acc, %v_a;",                 /* block comments anywhere */
        "add.f32 %v_acc, /* c */ %v_acc, %v_a;",
        "add.f32 %v_acc, %v_acc, %v_a;\n/* trailing */\n",
        "add.f32 %v_acc, %v_acc, %v_a; /* x */",
        "add.f32 %v_acc, // why\n %v_acc, %v_a;",                 /* "//" inside a statement */
        "add.f32 %v_acc, %v_acc, %v_a // no semicolon yet\n;",
    };
    static const char *const good[][2] = {
        {"st.global.f32 [%rd1], %v_a;", "st.global.f32 [%rd1], %f321;"},           /* reads */
        {"add.f32 %v_acc, %v_a, %v_a;", "add.f32 %f3440, %f321, %f321;"},
        {"// only a comment naming %v_a\nmov.f32 %v_acc, %v_a;\n",
         "// only a comment naming %f321\nmov.f32 %f3440, %f321;\n"},
        {"// a /* inside a line comment\nmov.f32 %v_acc, %v_a;", "// a /* inside a line comment\nmov.f32 %f3440, %f321;"},
        {"{\n\t.reg .f32 %t<2>;\n\tmul.f32 %t0, %v_a, %v_a;\n\tadd.f32 %v_acc, %v_acc, %t0;\n}\n",
         "{\n\t.reg .f32 %t<2>;\n\tmul.f32 %t0, %f321, %f321;\n\tadd.f32 %f3440, %f3440, %t0;\n}\n"},
        {"{ .reg .f32 %f32; .reg .b32 %r<400>; mov.f32 %v_acc, %v_a; }",               /* %f32 != %f321 */
         "{ .reg .f32 %f32; .reg .b32 %r<400>; mov.f32 %f3440, %f321; }"},
        {"L1:\n\tadd.f32 %v_acc, %v_acc, %v_a;\n\t@%p1 bra L1;", "L1:\n\tadd.f32 %f3440, %f3440, %f321;\n\t@%p1 bra L1;"},
        {"@%p1 mov.f32 %v_acc, %v_a; ; ;", "@%p1 mov.f32 %f3440, %f321; ; ;"},
        /* glued destinations and "::" opcodes that write no in variable */
        {"mov.f32%v_acc, %v_a;", "mov.f32%f3440, %f321;"},
        {"mov.b64{%v_acc, %t}, %rd1;", "mov.b64{%f3440, %t}, %rd1;"},
        {"ld.shared::cta.f32 %v_acc, [%rd1];", "ld.shared::cta.f32 %f3440, [%rd1];"},
        {"@%p1 ld.shared::cta.f32%v_acc, [%rd1+4];\nst.shared::cta.f32 [%rd1], %v_a;",
         "@%p1 ld.shared::cta.f32%f3440, [%rd1+4];\nst.shared::cta.f32 [%rd1], %f321;"},
        /* names that are no operand: longer, shorter, other prefix or case, ranges that cover
           none (%f3210, %f32, %fd321, %F321, %f344, %f32x<2>, %fd<4>) */
        {"add.f32 %v_acc, %f3210, %f32; // %fd321 %F321 %f344\nadd.f32 %v_acc, %v_acc, %v_a;",
         "add.f32 %f3440, %f3210, %f32; // %fd321 %F321 %f344\nadd.f32 %f3440, %f3440, %f321;"},
        {"{\n.reg .f32 %f32x<2>;\n.reg .f64 %fd<4>;\nmov.f32 %v_acc, %v_a;\n}",
         "{\n.reg .f32 %f32x<2>;\n.reg .f64 %fd<4>;\nmov.f32 %f3440, %f321;\n}"},
    };
    /* predicate, pointer and value: the guard reads the in predicate (binds); a store through
       the in pointer names it in the destination (the conservative rule: plain) */
    const char *frame2 = OPEN "\t.reg .pred %v_p;\n\t.reg .b64 %v_ptr;\n\t.reg .f32 %v_x;\n\t.reg .f32 %v_y;\n"
        "\tmov.pred %v_p, %p1;\n\tmov.b64 %v_ptr, %rd7;\n\tmov.f32 %v_x, %f5;\n\t// PTX_INJECT_BEGIN st\n"
        "\t// PTX_INJECT_VAR in pred pred v_p p\n\t// PTX_INJECT_VAR in u64 b64 v_ptr ptr\n"
        "\t// PTX_INJECT_VAR in f32 f32 v_x x\n\t// PTX_INJECT_VAR out f32 f32 v_y y\n\t// PTX_INJECT_END\n"
        "\tmov.f32 %f9, %v_y;\n" CLOSE;
    /* an f64 operand %fd3: "%f<400>" does not cover it ("d3" is no number), "%fd<9>" does */
    const char *frame_d = OPEN "\t.reg .f64 %v_d;\n\t.reg .f64 %v_e;\n\tmov.f64 %v_d, %fd3;\n\t// PTX_INJECT_BEGIN d\n"
        "\t// PTX_INJECT_VAR in f64 f64 v_d d\n\t// PTX_INJECT_VAR out f64 f64 v_e e\n\t// PTX_INJECT_END\n"
        "\tmov.f64 %fd4, %v_e;\n" CLOSE;
    size_t i;
    g_test = "stub_rules";
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) plain1(FRAME, bad[i]);
    for (i = 0; i < sizeof good / sizeof good[0]; i++) bind1(FRAME, "mac", good[i][0], good[i][1]);
    bind1(frame2, "st", "@%v_p add.f32 %v_y, %v_x, %v_x;", "@%p1 add.f32 %f9, %f5, %f5;");
    bind1(frame2, "st", "ld.global.f32 %v_y, [%v_ptr+4];\n@!%v_p st.global.f32 [%rd1], %v_x;",
          "ld.global.f32 %f9, [%rd7+4];\n@!%p1 st.global.f32 [%rd1], %f5;");
    plain1(frame2, "st.global.f32 [%v_ptr], %v_x;\nmov.f32 %v_y, %v_x;");
    bind1(frame2, "st", "ld.shared::cta.f32 %v_y, [%v_ptr];", "ld.shared::cta.f32 %f9, [%rd7];");
    bind1(frame2, "st", "@%v_p ld.shared::cta.f32%v_y, [%v_ptr+8];", "@%p1 ld.shared::cta.f32%f9, [%rd7+8];");
    plain1(frame2, "ld.shared::cta.f32 %v_x, [%v_ptr];");
    plain1(frame2, "ld.shared::cta.b64 %v_ptr, [%v_ptr];");
    plain1(frame2, "ld.shared::cta.f32 %v_y, [%rd7];");       /* the pointer's operand */
    plain1(frame2, "@%p1 mov.f32 %v_y, %v_x;");               /* the predicate's operand */
    plain1(frame2, "setp.eq.f32 %v_p, %v_x, %v_x;");
    bind1(frame_d, "d", "{\n.reg .f32 %f<400>;\nadd.f64 %v_e, %v_d, %v_d;\n}\n", "{\n.reg .f32 %f<400>;\nadd.f64 %fd4, %fd3, %fd3;\n}\n");
    plain1(frame_d, "{\n.reg .f64 %fd<9>;\nadd.f64 %v_e, %v_d, %v_d;\n}\n");
    plain1(frame_d, "{\n.reg .f64 %fd4;\nadd.f64 %v_e, %v_d, %v_d;\n}\n");   /* the out operand */
    /* at most PTXINJ_BIND_MAX_VARS variables */
    many_vars(2, 1);
    many_vars((int)PTXINJ_BIND_MAX_VARS, 1);
    many_vars((int)PTXINJ_BIND_MAX_VARS + 1, 0);
}

/* ---- 4. operand types: the PTX must declare each operand's register range with its variable's
   regtype ------------------------------------------------------------------------------------ */

#define FDECL "\t.reg .f32 \t%f<4000>;\n"
#define ADD_STUB "add.f32 %v_acc, %v_acc, %v_a;\n"
#define ADD_BOUND "add.f32 %f3440, %f3440, %f321;\n"

/* decls PRE0 frame POST: binds to `bound`, or plain (NULL) */
static void typed1(const char *decls, const char *frame, const char *site, const char *stub, const char *bound)
{
    sb pre = {0, 0, 0};
    sb_puts(&pre, decls);
    sb_puts(&pre, PRE0);
    bind_in(pre.p, frame, POST, site, stub, bound);
    free(pre.p);
}

/* FRAME (operands %f321, %f3440) after `first`, nf declarations of filler prefixes (%gaa, %gab,
   ...: `distinct` different ones, repeated in turn) and `last`: binds or renders plain. */
static void crowded(const char *first, int nf, int distinct, const char *last, int want_bound)
{
    sb pre = {0, 0, 0};
    int i;
    sb_puts(&pre, first);
    for (i = 0; i < nf; i++) sb_printf(&pre, "\t.reg .b32 \t%%g%c%c<4>;\n", 'a' + i % distinct / 26, 'a' + i % distinct % 26);
    sb_puts(&pre, last);
    sb_puts(&pre, PRE0);
    bind_in(pre.p, FRAME, POST, "mac", ADD_STUB, want_bound ? ADD_BOUND : NULL);
    free(pre.p);
}

static void test_types(void)
{
    /* declarations (before PRE0 FRAME POST) that type %f321 and %f3440 as f32: it binds */
    static const char *const good[] = {
        FDECL,
        ".reg .f32 %f<3521>;\n",
        "  .reg\t.f32  %f<1>;  \r\n",                                 /* blanks, CRLF; N is not looked at */
        FDECL FDECL,                                                  /* again with the same type */
        FDECL "\t.reg .f32 %f<9>;\n",
        "\t.reg .b32 %r<32>;\n\t.reg .b64 %rd<52>;\n" FDECL "\t.reg .f64 %fd<9>;\n\t.reg .pred %p<3>;\n",
        "\t.reg .b32 %fd<9>;\n\t.reg .b32 %F<9>;\n\t.reg .b32 %ff<9>;\n" FDECL,   /* other prefixes */
        /* lines that declare no range do not count, whatever their type */
        "\t.reg .b32 %f;\n\t.reg .b32 %f321;\n\t.reg .b32 %f3440;\n" FDECL,     /* no "<N>" (frame style) */
        "\t// .reg .b32 %f<9>;\n\t.reg .b32 %f<9>; // x\n" FDECL,               /* comments */
        "\t.reg .b32 %f<3>, %g<3>;\n\t.reg .v2 .b32 %f<9>;\n\t.reg.b32 %f<9>;\n\t.reg .b32 %f <9>;\n" FDECL,
        "\t.reg .b32 %f3<9>;\n\t.reg .b32 %<9>;\n" FDECL,                      /* a digit in the prefix, no prefix */
        "\t{\n\t.reg .f32 %v_a;\n\t}\n" FDECL,
    };
    /* declarations that leave %f321 or %f3440 untyped: plain */
    static const char *const bad[] = {
        "",                                                           /* undeclared */
        "\t.reg .b32 %f<4000>;\n",                                    /* another type */
        "\t.reg .F32 %f<4000>;\n",                                    /* the type token exactly */
        "\t.reg .f32 %F<4000>;\n\t.reg .f32 %fd<4000>;\n\t.reg .f32 %ff<4000>;\n",   /* other prefixes */
        FDECL "\t.reg .b32 %f<4000>;\n",                              /* two types: ambiguous */
        "\t.reg .b32 %f<4000>;\n" FDECL,
        FDECL "\t.reg .f64 %f<2>;\n" FDECL,                           /* and it stays so */
        "\t.reg .f32 %f;\n\t.reg .f32 %f321;\n\t.reg .f32 %f3440;\n",  /* no "<N>": frame-style lines do not count */
        "\t.reg .f32 %v_a;\n\t.reg .f32 %v_acc;\n",
        "\t// .reg .f32 %f<4000>;\n",                                 /* a comment */
        "\t.reg .f32 %f<4000>; // registers\n",                       /* not exactly the declaration */
        "\t.reg .f32 %f<4000>, %r<2>;\n",                             /* two names */
        "\t.reg .f32 %f <4000>;\n",
        "\t.reg .v2 .f32 %f<4000>;\n",
        "\t.reg.f32 %f<4000>;\n",
        "\t.reg .f32 %f3<4000>;\n",                                   /* "%f3<N>": a prefix with a digit */
        "\t.reg .f32 %f32<4000>;\n\t.reg .f32 %f34<4000>;\n",
    };
    /* an in u32 from %r3 and an out u32 to %r4 */
#define FRAME_U(in_op, out_op) OPEN "\t.reg .u32 %v_i;\n\t.reg .u32 %v_j;\n\tmov.u32 %v_i, " in_op ";\n" \
    "\t// PTX_INJECT_BEGIN u\n\t// PTX_INJECT_VAR in u32 u32 v_i i\n\t// PTX_INJECT_VAR out u32 u32 v_j j\n" \
    "\t// PTX_INJECT_END\n\tmov.u32 " out_op ", %v_j;\n" CLOSE
#define FRAME_OP(a, acc) OPEN DA DACC "\tmov.f32 %v_a, " a ";\n\tmov.f32 %v_acc, " acc ";\n" BLK \
    "\tmov.f32 " acc ", %v_acc;\n" CLOSE
    const char *frame2 = OPEN "\t.reg .pred %v_p;\n\t.reg .b64 %v_ptr;\n\t.reg .f32 %v_y;\n"
        "\tmov.pred %v_p, %p1;\n\tmov.b64 %v_ptr, %rd7;\n\t// PTX_INJECT_BEGIN st\n"
        "\t// PTX_INJECT_VAR in pred pred v_p p\n\t// PTX_INJECT_VAR in u64 b64 v_ptr ptr\n"
        "\t// PTX_INJECT_VAR out f32 f32 v_y y\n\t// PTX_INJECT_END\n\tmov.f32 %f9, %v_y;\n" CLOSE;
    const char *st_stub = "@%v_p ld.global.f32 %v_y, [%v_ptr];", *st_bound = "@%p1 ld.global.f32 %f9, [%rd7];";
    size_t i;
    g_test = "types";
    for (i = 0; i < sizeof good / sizeof good[0]; i++) typed1(good[i], FRAME, "mac", ADD_STUB, ADD_BOUND);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) typed1(bad[i], FRAME, "mac", ADD_STUB, NULL);
    /* the whole PTX is scanned first: declarations after the frame count too */
    bind_in(PRE0, FRAME, POST FDECL, "mac", ADD_STUB, ADD_BOUND);
    bind_in(PRE0, FRAME, POST FDECL "\t.reg .b32 %f<2>;\n", "mac", ADD_STUB, NULL);
    /* every variable: one operand of another type is enough to keep the instance plain */
    typed1(DECL, FRAME_OP("%f321", "%r5"), "mac", ADD_STUB, NULL);              /* %r: .b32 */
    typed1(DECL, FRAME_OP("%r5", "%f3440"), "mac", ADD_STUB, NULL);
    typed1(FDECL "\t.reg .f32 %r<8>;\n", FRAME_OP("%f321", "%r5"), "mac", ADD_STUB, "add.f32 %r5, %r5, %f321;\n");
    typed1(DECL, FRAME_O("%r7"), "o", "mov.f32 %v_o, 0f3F800000;", NULL);       /* an out variable too */
    typed1(DECL, FRAME_O("%f7"), "o", "mov.f32 %v_o, 0f3F800000;", "mov.f32 %f7, 0f3F800000;");
    /* the type token must equal the regtype: .b32 is not u32 (though PTX would accept it) */
    typed1("\t.reg .b32 %r<32>;\n", FRAME_U("%r3", "%r4"), "u", "add.u32 %v_j, %v_i, 1;", NULL);
    typed1("\t.reg .s32 %r<32>;\n", FRAME_U("%r3", "%r4"), "u", "add.u32 %v_j, %v_i, 1;", NULL);
    typed1("\t.reg .u32 %r<32>;\n", FRAME_U("%r3", "%r4"), "u", "add.u32 %v_j, %v_i, 1;", "add.u32 %r4, %r3, 1;");
    typed1("\t.reg .b32 %r<32>;\n\t.reg .u32 %ru<4>;\n", FRAME_U("%ru3", "%r4"), "u", "add.u32 %v_j, %v_i, 1;", NULL);
    typed1("\t.reg .b32 %r<32>;\n\t.reg .u32 %ru<4>;\n", FRAME_U("%ru3", "%ru2"), "u", "add.u32 %v_j, %v_i, 1;",
           "add.u32 %ru2, %ru3, 1;");
    /* pred and b64 operands */
    typed1(DECL, frame2, "st", st_stub, st_bound);
    typed1("\t.reg .pred %p<3>;\n\t.reg .f32 %f<10>;\n\t.reg .b64 %rd<9>;\n", frame2, "st", st_stub, st_bound);
    typed1("\t.reg .pred %p<3>;\n\t.reg .f32 %f<10>;\n\t.reg .u64 %rd<9>;\n", frame2, "st", st_stub, NULL);
    typed1("\t.reg .b32 %p<3>;\n\t.reg .f32 %f<10>;\n\t.reg .b64 %rd<9>;\n", frame2, "st", st_stub, NULL);
    typed1("\t.reg .f32 %f<10>;\n\t.reg .b64 %rd<9>;\n", frame2, "st", st_stub, NULL);
    /* the operand is "%<prefix><digits>": a register without its number is plain, whatever is
       declared ("%f": the prefix alone; "%foo", "%f321x": no trailing digits) */
    typed1(FDECL, FRAME_OP("%f", "%f3440"), "mac", ADD_STUB, NULL);
    typed1(FDECL "\t.reg .f32 %foo<3>;\n\t.reg .f32 %foo;\n", FRAME_OP("%foo", "%f3440"), "mac", ADD_STUB, NULL);
    typed1(FDECL "\t.reg .f32 %f321x;\n", FRAME_OP("%f321x", "%f3440"), "mac", ADD_STUB, NULL);
    /* identifier bytes other than digits belong to the prefix; leading zeros are digits */
    typed1(FDECL "\t.reg .f32 %f_$<3>;\n", FRAME_OP("%f_$2", "%f3440"), "mac", ADD_STUB, "add.f32 %f3440, %f3440, %f_$2;\n");
    typed1(FDECL "\t.reg .f32 %f_<3>;\n", FRAME_OP("%f_$2", "%f3440"), "mac", ADD_STUB, NULL);
    typed1(FDECL, FRAME_OP("%f0321", "%f3440"), "mac", ADD_STUB, "add.f32 %f3440, %f3440, %f0321;\n");
    /* at most 32 prefixes are remembered, in order of first declaration: a prefix first declared
       after 32 others is not known, so its operands keep the plain rendering (the conservative
       outcome: binding is an optimisation, the plain rendering is always correct) */
    crowded("", 31, 31, FDECL, 1);                       /* %f is the 32nd: remembered */
    crowded("", 32, 32, FDECL, 0);                       /* the 33rd: not */
    crowded("", 40, 40, FDECL, 0);
    crowded("", 64, 4, FDECL, 1);                        /* repeats take no room */
    crowded(FDECL, 40, 40, "", 1);                       /* remembered before the table filled */
    crowded(FDECL, 40, 40, FDECL, 1);
    crowded(FDECL, 40, 40, "\t.reg .b32 %f<2>;\n", 0);   /* ...and still made ambiguous after */
    crowded("\t.reg .b32 %f<2>;\n", 40, 40, FDECL, 0);
#undef FRAME_U
#undef FRAME_OP
}

/* ---- 5. ranges shadowing variable registers ------------------------------------------------ */

/* one mod f32 variable with register reg (operand %f3440); stub
   "{\n<directive>\nmov.f32 %<reg>, 0f3F800000;\n}" binds or renders plain */
static void shadow1(const char *reg, const char *directive, int want_bound)
{
    sb frame = {0, 0, 0}, stub = {0, 0, 0}, bound = {0, 0, 0};
    sb_printf(&frame, "\t{\n\t.reg .f32 %%%s;\n\tmov.f32 %%%s, %%f3440;\n\t// PTX_INJECT_BEGIN m\n"
              "\t// PTX_INJECT_VAR mod f32 f32 %s acc\n\t// PTX_INJECT_END\n\tmov.f32 %%f3440, %%%s;\n\t}\n",
              reg, reg, reg, reg);
    sb_printf(&stub, "{\n%s\nmov.f32 %%%s, 0f3F800000;\n}", directive, reg);
    sb_printf(&bound, "{\n%s\nmov.f32 %%f3440, 0f3F800000;\n}", directive);
    bind1(frame.p, "m", stub.p, want_bound ? bound.p : NULL);
    free(frame.p); free(stub.p); free(bound.p);
}

static void test_shadow(void)
{
    /* a mod variable v_acc0 next to an in variable v_a */
    const char *frame = OPEN DA "\t.reg .f32 %v_acc0;\n" MA "\tmov.f32 %v_acc0, %f3440;\n"
        "\t// PTX_INJECT_BEGIN acc0\n\t// PTX_INJECT_VAR in f32 f32 v_a a\n\t// PTX_INJECT_VAR mod f32 f32 v_acc0 acc\n"
        "\t// PTX_INJECT_END\n\tmov.f32 %f3440, %v_acc0;\n" CLOSE;
    g_test = "shadow";
    /* "%v_acc<2>" declares %v_acc0 and %v_acc1: the stub's own %v_acc0 would shadow the variable */
    plain1(frame, "{\n.reg .f32 %v_acc<2>;\nmov.f32 %v_acc0, 0f12345678;\n}");
    plain1(frame, ".reg .f32 %v_acc<2>;\nadd.f32 %v_acc0, %v_acc0, %v_a;");
    plain1(frame, "{ .reg .f32 %t, %v_acc<2>; add.f32 %v_acc0, %v_acc0, %v_a; }");   /* any name of the directive */
    plain1(frame, "{\nL1: .reg .pred %v_acc<0>;\nadd.f32 %v_acc0, %v_acc0, %v_a;\n}");   /* N is not looked at */
    /* the name before '<' is the register itself: plain (by the exact-name rule), although
       "%v_acc0<2>" declares %v_acc00 and %v_acc01 only - conservative */
    plain1(frame, "{\n.reg .f32 %v_acc0<2>;\nmov.f32 %v_acc0, %v_a;\n}");
    /* near misses: the rest of the register is not all digits, or the name is longer */
    bind1(frame, "acc0", "{\n.reg .f32 %v_ac<2>;\nmov.f32 %v_acc0, %v_a;\n}", "{\n.reg .f32 %v_ac<2>;\nmov.f32 %f3440, %f321;\n}");
    bind1(frame, "acc0", "{\n.reg .f32 %v_<2>;\nmov.f32 %v_acc0, %v_a;\n}", "{\n.reg .f32 %v_<2>;\nmov.f32 %f3440, %f321;\n}");
    bind1(frame, "acc0", "{\n.reg .f32 %v_acc00<2>;\nmov.f32 %v_acc0, %v_a;\n}",
          "{\n.reg .f32 %v_acc00<2>;\nmov.f32 %f3440, %f321;\n}");
    bind1(frame, "acc0", "{\n.reg .f32 %v_acc1<2>;\nmov.f32 %v_acc0, %v_a;\n}",
          "{\n.reg .f32 %v_acc1<2>;\nmov.f32 %f3440, %f321;\n}");
    /* only directives count: a range in a comment is only text */
    bind1(frame, "acc0", "mov.f32 %v_acc0, %v_a; // .reg .f32 %v_acc<2>;\n", "mov.f32 %f3440, %f321; // .reg .f32 %v_acc<2>;\n");
    /* the register is the name followed by one or more digits, nothing else */
    shadow1("x01", ".reg .f32 %x<2>;", 0);      /* conservative: %x<2> declares %x0 and %x1 only */
    shadow1("x01", ".reg .f32 %x0<2>;", 0);     /* %x00 and %x01 */
    shadow1("x01", ".reg .f32 %x01<2>;", 0);    /* the name itself (exact-name rule) */
    shadow1("x01", ".reg .f32 %x010<2>;", 1);
    shadow1("v1x2", ".reg .f32 %v<2>;", 1);     /* "1x2" is no number */
    shadow1("v1x2", ".reg .f32 %v1<2>;", 1);
    shadow1("v1x2", ".reg .f32 %v1x<3>;", 0);
    shadow1("r$1", ".reg .b32 %r<2>;", 1);      /* '$' is no digit */
    shadow1("r$1", ".reg .b32 %r$<2>;", 0);
    shadow1("acc", ".reg .f32 %ac<2>;", 1);
    shadow1("acc", ".reg .f32 %acc<2>;", 0);
    shadow1("acc", ".reg .f32 %Acc<2>;", 1);
}

/* ---- 6. mixed instances ------------------------------------------------------------------- */

/* FRAME with the operands %f5 (a) and %f6 (acc) */
#define FRAME56 OPEN DA DACC "\tmov.f32 %v_a, %f5;\n\tmov.f32 %v_acc, %f6;\n" BLK "\tmov.f32 %f6, %v_acc;\n" CLOSE

static void test_mixed(void)
{
    const char *stub[1] = {"add.f32 %v_acc, %v_acc, %v_a;"};
    const char *ranged[1] = {"{\n.reg .f32 %f32<2>;\nadd.f32 %v_acc, %v_acc, %v_a;\n}"};
    const char *reads5[1] = {"add.f32 %v_acc, %v_acc, %f5;"};
    const char *decl5[1] = {".reg .f32 %f5;\nmov.f32 %f5, %v_a;\nadd.f32 %v_acc, %v_acc, %f5;\n"};
#define FRAME_IMM OPEN DA DACC "\tmov.f32 %v_a, 0f3F800000;\n" MACC BLK BACK CLOSE
#define FRAME_R OPEN DA DACC "\tmov.b32 %v_a, %r12;\n" MACC BLK BACK CLOSE   /* %r is .b32, v_a is f32 */
    g_test = "mixed";
    expect_bound(DECL FRAME FRAME_IMM FRAME, stub,
                 DECL WRAP("add.f32 %f3440, %f3440, %f321;\n") OPEN DA DACC "\tmov.f32 %v_a, 0f3F800000;\n" MACC
                 "add.f32 %v_acc, %v_acc, %v_a;\n" BACK CLOSE WRAP("add.f32 %f3440, %f3440, %f321;\n"),
                 DECL WRAP(TAG("mac", "add.f32 %f3440, %f3440, %f321;")) OPEN DA DACC "\tmov.f32 %v_a, 0f3F800000;\n" MACC
                 TAG("mac", "add.f32 %v_acc, %v_acc, %v_a;") BACK CLOSE WRAP(TAG("mac", "add.f32 %f3440, %f3440, %f321;")));
    /* an operand of another type (%r12: .b32) keeps its instance plain, the others bind */
    expect_bound(DECL FRAME FRAME_R FRAME, stub,
                 DECL WRAP("add.f32 %f3440, %f3440, %f321;\n") OPEN DA DACC "\tmov.b32 %v_a, %r12;\n" MACC
                 "add.f32 %v_acc, %v_acc, %v_a;\n" BACK CLOSE WRAP("add.f32 %f3440, %f3440, %f321;\n"),
                 NULL);
    /* the same stub, its range clashing with the operand of one instance only (%f32<2> covers
       %f321, not %f5 or %f6; a block: no scope added) */
    expect_bound(DECL FRAME56 FRAME, ranged,
                 DECL "{\n.reg .f32 %f32<2>;\nadd.f32 %f6, %f6, %f5;\n}\n"
                 OPEN DA DACC MA MACC "{\n.reg .f32 %f32<2>;\nadd.f32 %v_acc, %v_acc, %v_a;\n}\n" BACK CLOSE,
                 DECL TAG("mac", "{\n.reg .f32 %f32<2>;\nadd.f32 %f6, %f6, %f5;\n}")
                 OPEN DA DACC MA MACC TAG("mac", "{\n.reg .f32 %f32<2>;\nadd.f32 %v_acc, %v_acc, %v_a;\n}")
                 BACK CLOSE);
    /* a stub naming %f5: plain where %f5 is an operand, bound elsewhere */
    expect_bound(DECL FRAME FRAME56 FRAME, reads5,
                 DECL WRAP("add.f32 %f3440, %f3440, %f5;\n") OPEN DA DACC "\tmov.f32 %v_a, %f5;\n\tmov.f32 %v_acc, %f6;\n"
                 "add.f32 %v_acc, %v_acc, %f5;\n\tmov.f32 %f6, %v_acc;\n" CLOSE WRAP("add.f32 %f3440, %f3440, %f5;\n"),
                 NULL);
    expect_bound(DECL FRAME56 FRAME, decl5,
                 DECL OPEN DA DACC "\tmov.f32 %v_a, %f5;\n\tmov.f32 %v_acc, %f6;\n"
                 ".reg .f32 %f5;\nmov.f32 %f5, %v_a;\nadd.f32 %v_acc, %v_acc, %f5;\n\tmov.f32 %f6, %v_acc;\n" CLOSE
                 WRAP(".reg .f32 %f5;\nmov.f32 %f5, %f321;\nadd.f32 %f3440, %f3440, %f5;\n"),
                 NULL);
    /* a bare block (no frame) between bound ones */
    expect_bound(DECL FRAME "x\n" BLK "y\n" FRAME, stub,
                 DECL WRAP("add.f32 %f3440, %f3440, %f321;\n") "x\nadd.f32 %v_acc, %v_acc, %v_a;\ny\n"
                 WRAP("add.f32 %f3440, %f3440, %f321;\n"), NULL);
    /* the declarations may come anywhere in the PTX (all of it is scanned first): after the
       frames too; without them nothing binds */
    expect_bound(FRAME FRAME56 DECL, stub,
                 WRAP("add.f32 %f3440, %f3440, %f321;\n") WRAP("add.f32 %f6, %f6, %f5;\n") DECL, NULL);
    expect_plain(FRAME FRAME56, stub);
}

/* ---- 7. scope: a bound stub keeps a scope of its own --------------------------------------- */

/* stub s on PRE FRAME POST binds to PRE untagged POST, and to PRE tagged POST with TAG */
static void scope1(const char *s, const char *untagged, const char *tagged)
{
    sb want = {0, 0, 0}, tag = {0, 0, 0};
    const char *stubs[1];
    stubs[0] = s;
    sb_puts(&want, PRE); sb_puts(&want, untagged); sb_puts(&want, POST);
    sb_puts(&tag, PRE); sb_puts(&tag, tagged); sb_puts(&tag, POST);
    expect_bound(PRE FRAME POST, stubs, want.p, tag.p);
    free(want.p); free(tag.p);
}

static void test_scope(void)
{
    /* the stub, what it is bound to, and whether it is one block (no scope added) */
    static const struct { const char *stub, *bound; int block; } cases[] = {
        {"{ mov.f32 %v_acc, %v_a; }", "{ mov.f32 %f3440, %f321; }", 1},
        {" \n\t{\n\tadd.f32 %v_acc, %v_acc, %v_a;\n\t}\n\n", " \n\t{\n\tadd.f32 %f3440, %f3440, %f321;\n\t}\n\n", 1},
        {"\r\n{\r\n.reg .f32 %t;\r\nadd.f32 %t, %v_a, %v_a;\r\nadd.f32 %v_acc, %v_acc, %t;\r\n}\r\n",
         "\r\n{\r\n.reg .f32 %t;\r\nadd.f32 %t, %f321, %f321;\r\nadd.f32 %f3440, %f3440, %t;\r\n}\r\n", 1},
        {"{{\nadd.f32 %v_acc, %v_acc, %v_a;\n}\n{\nadd.f32 %v_acc, %v_acc, %v_a;\n}}",
         "{{\nadd.f32 %f3440, %f3440, %f321;\n}\n{\nadd.f32 %f3440, %f3440, %f321;\n}}", 1},
        {"{ // }\nadd.f32 %v_acc, %v_acc, %v_a;\n}", "{ // }\nadd.f32 %f3440, %f3440, %f321;\n}", 1},
        {"{\nadd.f32 %v_acc, %v_acc, %v_a; // {{\n}\n", "{\nadd.f32 %f3440, %f3440, %f321; // {{\n}\n", 1},
        /* not one block: two blocks, a comment before or after the block, code outside it */
        {"{ add.f32 %v_acc, %v_acc, %v_a; } { add.f32 %v_acc, %v_acc, %v_a; }",
         "{ add.f32 %f3440, %f3440, %f321; } { add.f32 %f3440, %f3440, %f321; }", 0},
        {"{\nadd.f32 %v_acc, %v_acc, %v_a;\n}\n{\nadd.f32 %v_acc, %v_acc, %v_a;\n}\n",
         "{\nadd.f32 %f3440, %f3440, %f321;\n}\n{\nadd.f32 %f3440, %f3440, %f321;\n}\n", 0},
        {"// {\n{\nadd.f32 %v_acc, %v_acc, %v_a;\n}\n", "// {\n{\nadd.f32 %f3440, %f3440, %f321;\n}\n", 0},
        {"{\nadd.f32 %v_acc, %v_acc, %v_a;\n} // }\n", "{\nadd.f32 %f3440, %f3440, %f321;\n} // }\n", 0},
        {"{\nadd.f32 %v_acc, %v_acc, %v_a;\n}\nnop;", "{\nadd.f32 %f3440, %f3440, %f321;\n}\nnop;", 0},
        {"nop;\n{\nadd.f32 %v_acc, %v_acc, %v_a;\n}", "nop;\n{\nadd.f32 %f3440, %f3440, %f321;\n}", 0},
        {"{ add.f32 %v_acc, %v_acc, %v_a; // }", "{ add.f32 %f3440, %f3440, %f321; // }", 0},
        /* unbraced declarations and labels: bound, and the scope keeps them local */
        {".reg .f32 %t;\nadd.f32 %t, %v_a, %v_a;\nadd.f32 %v_acc, %v_acc, %t;",
         ".reg .f32 %t;\nadd.f32 %t, %f321, %f321;\nadd.f32 %f3440, %f3440, %t;", 0},
        {"$L_1:\n\tadd.f32 %v_acc, %v_acc, %v_a;\n\t@%p1 bra $L_1;\n",
         "$L_1:\n\tadd.f32 %f3440, %f3440, %f321;\n\t@%p1 bra $L_1;\n", 0},
    };
    static const char *const two_stub[1] = {".reg .f32 %t;\nadd.f32 %t, %v_a, %v_a;\nadd.f32 %v_acc, %v_acc, %t;"};
    size_t i;
    g_test = "scope";
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sb u = {0, 0, 0}, t = {0, 0, 0};
        size_t n = strlen(cases[i].stub);
        int nl = cases[i].stub[n - 1] != '\n';
        CHECK(one_block(cases[i].stub, n) == cases[i].block);   /* the test's own oracle agrees */
        sb_printf(&u, "%s%s%s%s", cases[i].block ? "" : "\t{\n", cases[i].bound, nl ? "\n" : "",
                  cases[i].block ? "" : "\t}\n");
        sb_printf(&t, "%s\t// PTX_INJECT_STUB mac\n%s\n\t// PTX_INJECT_STUB_END\n%s", cases[i].block ? "" : "\t{\n",
                  cases[i].bound, cases[i].block ? "" : "\t}\n");
        scope1(cases[i].stub, u.p, t.p);
        bind1(FRAME, "mac", cases[i].stub, cases[i].bound);
        free(u.p); free(t.p);
    }
    /* two bound instances of one stub: each gets a scope of its own, so %t is declared once per scope */
    expect_bound(DECL FRAME FRAME56, two_stub,
                 DECL WRAP(".reg .f32 %t;\nadd.f32 %t, %f321, %f321;\nadd.f32 %f3440, %f3440, %t;\n")
                 WRAP(".reg .f32 %t;\nadd.f32 %t, %f5, %f5;\nadd.f32 %f6, %f6, %t;\n"),
                 DECL WRAP(TAG("mac", ".reg .f32 %t;\nadd.f32 %t, %f321, %f321;\nadd.f32 %f3440, %f3440, %t;"))
                 WRAP(TAG("mac", ".reg .f32 %t;\nadd.f32 %t, %f5, %f5;\nadd.f32 %f6, %f6, %t;")));
    /* a Stack PTX style block is written as it is, once per instance */
    {
        const char *blk[1] = {"{\n\t.reg .f32 %_0;\n\tmul.f32 %_0, %v_a, %v_a;\n\tadd.f32 %v_acc, %v_acc, %_0;\n}\n"};
        expect_bound(DECL FRAME FRAME56, blk,
                     DECL "{\n\t.reg .f32 %_0;\n\tmul.f32 %_0, %f321, %f321;\n\tadd.f32 %f3440, %f3440, %_0;\n}\n"
                     "{\n\t.reg .f32 %_0;\n\tmul.f32 %_0, %f5, %f5;\n\tadd.f32 %f6, %f6, %_0;\n}\n",
                     DECL TAG("mac", "{\n\t.reg .f32 %_0;\n\tmul.f32 %_0, %f321, %f321;\n\tadd.f32 %f3440, %f3440, %_0;\n}\n")
                     TAG("mac", "{\n\t.reg .f32 %_0;\n\tmul.f32 %_0, %f5, %f5;\n\tadd.f32 %f6, %f6, %_0;\n}\n"));
    }
    /* bound output parses to no site; the scope lines balance the braces they replace */
    {
        parsed p = parse_s(PRE FRAME FRAME56 POST), q;
        char *r = rend(&p, two_stub, PTXINJ_RENDER_BIND | PTXINJ_RENDER_TAG, NULL);
        q = parse_s(r ? r : "");
        CHECK(p.st == PTXINJ_OK && r && q.st == PTXINJ_OK && q.ctx.n_sites == 0);
        free(r);
        parsed_free(&q);
        parsed_free(&p);
    }
}

/* ---- 8. fuzz ------------------------------------------------------------------------------ */

/* Random frames of random sites (distinct variable registers, some prefixes of others), random
   stubs from pieces whose effect on binding is known, random lines between, and the register
   declarations of the operand prefixes (sometimes missing, mistyped, ambiguous or crowded out
   of the header's table: those operands keep their instances plain). The generator
   writes the expected plain and bound renderings itself; mutated texts (lines deleted,
   duplicated, swapped, bytes flipped, truncation) are only checked for consistent sizes and
   sanitizer cleanliness. */
enum { MAXV = 5, MAXSEG = 48, MAXI = 8 };
static const char *const g_regs[] = {"a", "ab", "a_b", "x0", "x01", "_x0", "v$", "v$1", "acc", "q"};
static const char *const g_rt[] = {"f32", "b32", "pred", "f64"};
static const char *const g_pfx[] = {"%f", "%r", "%p", "%fd"};   /* operand prefix per regtype */
static const char *const g_range[] = {"\t.reg .b32 %f<3>;\n", "\t.reg .b32 %r<3>;\n", "\t.reg .pred %p<3>;\n",
                                      "\t.reg .f64 %fd<3>;\n"};  /* covers operands of regtype i only */
static const char *const g_named[] = {"%f150", "%r150", "%p150", "%fd150"};   /* may be an operand */
static const char *const g_named_line[] = {"\tmov.f32 %s1, %f150;\n", "\tmov.b32 %s1, %r150;\n",
                                           "\t@%p150 bra $L_1;\n", "\t// keeps %fd150\n"};
/* range directives "%<name><N>" and the name: they shadow a variable register that is <name>
   or <name> followed only by digits (x: x0, x01; _x: _x0; v$: v$, v$1; x0: x0, x01; a: a;
   q: q); ac, v, a_ and ab<N> with ab no variable are near misses */
static const char *const g_shadow[] = {"\t.reg .f32 %x<2>;\n", "\t.reg .b32 %_x<4>;\n", "\t.reg .pred %v$<2>;\n",
                                       "\t.reg .f32 %x0<2>;\n", "\t.reg .f32 %ac<2>;\n", "\t.reg .f32 %a<2>;\n",
                                       "\t.reg .f32 %v<2>;\n", "\t.reg .f32 %t, %q<2>;\n", "\t.reg .f32 %a_<2>;\n",
                                       "\t.reg .f32 %ab<2>;\n"};
static const char *const g_shadow_name[] = {"x", "_x", "v$", "x0", "ac", "a", "v", "q", "a_", "ab"};

typedef struct gseg { const char *lit; int var, near; } gseg;   /* lit, then "%reg" (+ "Z" if near) */
typedef struct gsite {
    int nv, kind[MAXV], rt[MAXV], reg[MAXV];
    gseg seg[MAXSEG];
    int nseg, safe, drop_nl, ranges, named, missing;   /* ranges: bit i = g_range[i] declared;
                                                          named: bit i = g_named[i] named */
} gsite;

static void seg_add(gsite *s, const char *lit, int var, int near)
{
    if (s->nseg == MAXSEG) return;
    s->seg[s->nseg].lit = lit; s->seg[s->nseg].var = var; s->seg[s->nseg].near = near;
    s->nseg++;
}
static int pick_var(const gsite *s, int want)   /* want: -1 any, 0 an in variable, 1 out/mod */
{
    int j, n = 0, c[MAXV];
    for (j = 0; j < s->nv; j++)
        if (want < 0 || (want == 0) == (s->kind[j] == PTXINJ_IN)) c[n++] = j;
    return n ? c[rnd((uint32_t)n)] : -1;
}

/* Does a directive's range "%<name><N>" shadow a variable register of s: the register is
   name, or name followed by one or more digits? */
static int range_shadows(const gsite *s, const char *name)
{
    int j;
    size_t n = strlen(name), k;
    for (j = 0; j < s->nv; j++) {
        const char *r = g_regs[s->reg[j]];
        if (strncmp(r, name, n) != 0) continue;
        for (k = n; r[k] >= '0' && r[k] <= '9'; k++) {}
        if (r[k] == 0) return 1;
    }
    return 0;
}

/* s->safe = 0 when a piece breaks a stub rule (for every instance) */
static void gen_stub(gsite *s)
{
    int k, n = (int)rnd(7), j, o;
    s->nseg = 0; s->safe = 1; s->ranges = 0; s->named = 0; s->drop_nl = rnd(3) == 0; s->missing = rnd(12) == 0;
    for (k = 0; k < n; k++) {
        switch (rnd(13)) {
        case 0: case 1:   /* write an out/mod variable (the opcode may be glued to it), read anything */
            if ((o = pick_var(s, 1)) < 0) break;
            seg_add(s, rnd(4) ? "\tadd.f32 " : rnd(2) ? "\tadd.f32" : "\tld.shared::cta.f32 ", o, 0); seg_add(s, ", ", pick_var(s, -1), 0); seg_add(s, ", %s1;\n", -1, 0);
            break;
        case 2:           /* read an in variable */
            if ((j = pick_var(s, 0)) < 0) break;
            seg_add(s, "\tst.global.f32 [%rd1], ", j, 0); seg_add(s, ";\n", -1, 0);
            break;
        case 3:           /* a scoped temporary (a brace in a comment does not count) */
            seg_add(s, rnd(3) ? "\t{\n\t.reg .f32 %s0;\n\tmul.f32 %s0, " : "\t{ // }\n\t.reg .f32 %s0;\n\tmul.f32 %s0, ",
                    pick_var(s, -1), 0);
            seg_add(s, ", ", pick_var(s, -1), 0); seg_add(s, ";\n\t}\n", -1, 0);
            break;
        case 4:           /* a label and a guarded branch reading a variable */
            seg_add(s, "$L_1:\n\t@", pick_var(s, -1), 0); seg_add(s, " bra $L_1;\n", -1, 0);
            break;
        case 5:           /* a comment line naming a variable (rewritten too) */
            seg_add(s, rnd(2) ? "\t// uses " : rnd(2) ? "\t// { uses " : "\t// } uses ", pick_var(s, -1), 0);
            seg_add(s, "\n", -1, 0);
            break;
        case 6:           /* a near miss: "%<reg>Z" is no variable */
            if ((j = pick_var(s, -1)) < 0) break;
            seg_add(s, "\tmov.f32 %s2, ", j, 1); seg_add(s, ";\n", -1, 0);
            break;
        case 7:           /* a range declaration: clashes with operands of one regtype only */
            o = (int)rnd(4);
            seg_add(s, g_range[o], -1, 0);
            s->ranges |= 1 << o;
            break;
        case 8:           /* a rule breaker (rarely) */
            if (rnd(3)) break;
            s->safe = 0;
            switch (rnd(4)) {
            case 0:
                if ((j = pick_var(s, 0)) < 0) { seg_add(s, "/* x */\n", -1, 0); break; }
                o = (int)rnd(5);   /* "mov.f32%<reg>": the opcode ends where the destination starts */
                seg_add(s, o == 0 ? "\tmov.f32 " : o == 1 ? "\t@%p0 mov.f32 " : o == 2 ? "\tmov.f32" :
                           o == 3 ? "\t@%p0 mov.b64{%s0, " : "\tld.shared::cta.f32 ", j, 0);
                seg_add(s, o == 3 ? "}, %rd1;\n" : ", 0f00000000;\n", -1, 0);
                break;
            case 1: seg_add(s, "\tnop; /* x */\n", -1, 0); break;
            case 2:
                if ((j = pick_var(s, -1)) < 0) { seg_add(s, "\tadd.f32 %s0, // c\n%s0;\n", -1, 0); break; }
                seg_add(s, "\t.reg .f32 ", j, 0); seg_add(s, ";\n", -1, 0);
                break;
            default: seg_add(s, "\tadd.f32 %s0, // c\n%s0;\n", -1, 0); break;
            }
            break;
        case 12:          /* a range directive that may shadow a variable register */
            o = (int)rnd(sizeof g_shadow / sizeof g_shadow[0]);
            seg_add(s, g_shadow[o], -1, 0);
            if (range_shadows(s, g_shadow_name[o])) s->safe = 0;
            break;
        case 9:           /* a register that may be an operand of some instances (see gen_instance) */
            o = (int)rnd(4);
            seg_add(s, g_named_line[o], -1, 0);
            s->named |= 1 << o;
            break;
        default:          /* code naming no variable */
            seg_add(s, "\tadd.f32 %s1, %s1, %s1;\n", -1, 0);
            break;
        }
    }
    if (rnd(6) == 0 && (j = pick_var(s, -1)) >= 0) seg_add(s, "\tst.global.f32 [%rd1], ", j, 0);   /* ends in one */
    if (s->nseg && s->nseg + 2 <= MAXSEG && rnd(4) == 0) {   /* all of it one block (Stack PTX style) */
        memmove(s->seg + 1, s->seg, (size_t)s->nseg * sizeof s->seg[0]);
        s->seg[0].lit = "\t{\n"; s->seg[0].var = -1; s->seg[0].near = 0;
        s->nseg++;
        seg_add(s, rnd(2) ? "\n\t}\n" : "\n}", -1, 0);
    }
    if (s->missing) { s->nseg = 0; s->safe = 1; s->ranges = 0; s->named = 0; }   /* no stub: renders as an empty one */
}

/* the stub's text: as written (ops == NULL) or bound to the operands ops[j] */
static void stub_text(const gsite *s, char ops[][16], sb *out)
{
    int k;
    out->n = 0;
    sb_put(out, "", 0);
    for (k = 0; k < s->nseg; k++) {
        const gseg *g = &s->seg[k];
        sb_puts(out, g->lit);
        if (g->var < 0) continue;
        if (ops && !g->near) sb_puts(out, ops[g->var]);
        else sb_printf(out, "%%%s%s", g_regs[s->reg[g->var]], g->near ? "Z" : "");
    }
    if (s->drop_nl && out->n && out->p[out->n - 1] == '\n') out->p[--out->n] = 0;
}

static void put_line(sb *b, const char *text, const char *eol)
{
    static const char *const ind[] = {"\t", "", "  ", "\t\t"};
    sb_puts(b, ind[rnd(4)]);
    sb_puts(b, text);
    if (rnd(8) == 0) sb_puts(b, " ");
    sb_puts(b, eol);
}

static void shuffle(char lines[][64], int n)
{
    int i, j;
    char t[64];
    for (i = n - 1; i > 0; i--) {
        j = (int)rnd((uint32_t)i + 1);
        memcpy(t, lines[i], 64); memcpy(lines[i], lines[j], 64); memcpy(lines[j], t, 64);
    }
}

/* Appends some unrelated lines and one instance of site si to b, and what they render to under
   flags 0, TAG, BIND, BIND|TAG to want[0..3]. Returns whether the instance must bind. A defect
   (immediate operand, blank line, no braces, an operand without its number) keeps it plain; so
   does an operand of a regtype whose prefix is not typed (bit rt of `typed`, see gen_decls), a
   stub rule, or a register or range of the stub naming or covering one of this instance's
   operands. */
static int gen_instance(sb *b, sb want[4], const gsite *s, int si, const char *eol, int typed)
{
    static const char *const noise[] = {"add.f32 %f1, %f2, %f3;", "// ordinary comment", "", "bar.sync 0;", "{"};
    char ops[MAXV][16], pre[2 * MAXV + 1][64], post[MAXV][64];
    int j, k, np = 0, nq = 0, defect = rnd(8) == 0 ? 1 + (int)rnd(4) : 0, bound, f, covered = 0, untyped = 0;
    size_t start = b->n, fb, rb, re, fe;
    sb raw = {0, 0, 0}, bnd = {0, 0, 0};
    for (j = 0; j < s->nv; j++) {   /* distinct operands; an in variable may share the previous one's */
        do {
            sprintf(ops[j], "%s%u", g_pfx[s->rt[j]], 100 + rnd(900));
            for (k = 0; k < j && strcmp(ops[k], ops[j]) != 0; k++) {}
        } while (k < j);
        if (j && s->kind[j] == PTXINJ_IN && s->kind[j - 1] == PTXINJ_IN && s->rt[j] == s->rt[j - 1] && rnd(4) == 0)
            memcpy(ops[j], ops[j - 1], sizeof ops[j]);
        else if ((s->named >> s->rt[j] & 1) && rnd(3) == 0) {   /* the register the stub names */
            for (k = 0; k < j && strcmp(ops[k], g_named[s->rt[j]]) != 0; k++) {}
            if (k == j) strcpy(ops[j], g_named[s->rt[j]]);
        }
    }
    if (defect == 4) {   /* "%f" or "%fx": a register, but no "%<prefix><digits>" */
        if (s->nv) { j = (int)rnd((uint32_t)s->nv); sprintf(ops[j], "%s%s", g_pfx[s->rt[j]], rnd(2) ? "" : "x"); }
        else defect = 0;
    }
    for (j = 0; j < s->nv; j++) untyped |= !(typed >> s->rt[j] & 1);
    for (j = 0; j < s->nv; j++)
        covered |= (s->ranges >> s->rt[j] & 1) | ((s->named >> s->rt[j] & 1) && strcmp(ops[j], g_named[s->rt[j]]) == 0);
    for (k = (int)rnd(3); k > 0; k--) put_line(b, noise[rnd(5)], eol);
    for (j = 0; j < s->nv; j++) {
        sprintf(pre[np++], ".reg .%s %%%s;", g_rt[s->rt[j]], g_regs[s->reg[j]]);
        if (s->kind[j] != PTXINJ_OUT)
            sprintf(pre[np++], "mov.%s %%%s, %s;", g_rt[s->rt[j]], g_regs[s->reg[j]],
                    defect == 1 && rnd(2) ? "0f3F800000" : ops[j]);
        if (s->kind[j] != PTXINJ_IN) sprintf(post[nq++], "mov.%s %s, %%%s;", g_rt[s->rt[j]], ops[j], g_regs[s->reg[j]]);
    }
    if (defect == 1) {   /* no immediate drawn: a blank line instead */
        for (k = 0; k < np && !strstr(pre[k], "0f3F"); k++) {}
        if (k == np) defect = 2;
    }
    if (defect == 2) strcpy(pre[np++], "");
    shuffle(pre, np);
    shuffle(post, nq);
    fb = b->n;
    if (defect != 3) put_line(b, "{", eol);
    for (k = 0; k < np; k++) put_line(b, pre[k], eol);
    rb = b->n;
    sb_printf(b, "\t// PTX_INJECT_BEGIN s%d%s", si, eol);
    for (j = 0; j < s->nv; j++)
        sb_printf(b, "\t// PTX_INJECT_VAR %s f32 %s %s n%d%s",
                  s->kind[j] == PTXINJ_IN ? "in" : s->kind[j] == PTXINJ_OUT ? "out" : "mod",
                  g_rt[s->rt[j]], g_regs[s->reg[j]], j, eol);
    sb_printf(b, "\t// PTX_INJECT_END%s", eol);
    re = b->n;
    for (k = 0; k < nq; k++) put_line(b, post[k], eol);
    if (defect != 3) put_line(b, "}", eol);
    fe = b->n;
    bound = !defect && !untyped && s->safe && !covered;
    stub_text(s, NULL, &raw);
    stub_text(s, ops, &bnd);
    for (f = 0; f < 4; f++) {
        int bind = f >= 2 && bound, tag = f & 1;
        char site[16];
        sprintf(site, "s%d", si);
        sb_put(&want[f], b->p + start, (bind ? fb : rb) - start);
        if (bind) {
            put_bound(&want[f], site, raw.p, raw.n, bnd.p, bnd.n, tag);
        } else {
            if (tag) sb_printf(&want[f], "\t// PTX_INJECT_STUB %s\n", site);
            sb_put(&want[f], raw.p, raw.n);
            if (tag) sb_puts(&want[f], "\n\t// PTX_INJECT_STUB_END\n");
            else if (raw.n && raw.p[raw.n - 1] != '\n') sb_puts(&want[f], "\n");
            sb_put(&want[f], b->p + re, fe - re);
        }
    }
    free(raw.p); free(bnd.p);
    return bound;
}

static void mutate(sb *b)
{
    size_t ls[256], n = 0, i, a, l1, l2;
    char *t;
    for (i = 0; i < b->n && n < 255; i++)
        if (i == 0 || b->p[i - 1] == '\n') ls[n++] = i;
    ls[n] = b->n;
    if (n < 2) return;
    a = rnd((uint32_t)n - 1);   /* lines a and a + 1 exist */
    l1 = ls[a + 1] - ls[a];
    l2 = ls[a + 2] - ls[a + 1];
    switch (rnd(5)) {
    case 0:   /* delete line a */
        memmove(b->p + ls[a], b->p + ls[a + 1], b->n - ls[a + 1]);
        b->n -= l1;
        break;
    case 1:   /* duplicate line a */
        t = (char *)malloc(l1);
        memcpy(t, b->p + ls[a], l1);
        sb_put(b, t, l1);   /* grows b; then open the gap and copy the line into it */
        memmove(b->p + ls[a + 1] + l1, b->p + ls[a + 1], b->n - l1 - ls[a + 1]);
        memcpy(b->p + ls[a + 1], t, l1);
        free(t);
        break;
    case 2:   /* swap lines a and a + 1 */
        t = (char *)malloc(l1 + l2);
        memcpy(t, b->p + ls[a + 1], l2);
        memcpy(t + l2, b->p + ls[a], l1);
        memcpy(b->p + ls[a], t, l1 + l2);
        free(t);
        break;
    case 3:   /* overwrite a byte */
        i = rnd((uint32_t)b->n);
        b->p[i] = rnd(8) ? "{};%, \n\r/x0\t.*@"[rnd(16)] : (char)rnd(256);
        break;
    default:  /* truncate */
        b->n = rnd((uint32_t)b->n);
        break;
    }
    b->p[b->n] = 0;
}

/* The register declarations of one fuzz text, appended to d, line i ending at ends[i] (*nd
   lines). Returns the bits rt whose operands (g_pfx[rt] + digits) may bind, as BINDING states
   it: the first 32 distinct prefixes of ".reg .<type> %<prefix><N>;" lines are remembered, a
   prefix declared with two types is ambiguous, and the type must be g_rt[rt]. Each operand
   prefix is declared with its regtype (spacing varies); now and then it is left out,
   mistyped, declared twice (the same type: harmless; another: ambiguous), or crowded out of
   the table by filler prefixes declared first. Lines that are no such declaration (no "<N>",
   a digit in the prefix, no prefix, two names, a comment, a vector type) are mixed in with
   wrong types: they must not count. */
enum { MAXD = 64 };
static int gen_decls(sb *d, size_t ends[MAXD], int *nd, const char *eol)
{
    static const char *const ind[] = {"\t", "", "  "};
    static const char *const gap[] = {" \t", " ", "\t", "  "};
    static const char *const ignored[] = {"\t.reg .b32 %f;", "\t.reg .pred %f321;", "\t// .reg .b32 %f<9>;",
                                          "\t.reg .b32 %f3<4>;", "\t.reg .pred %<3>;", "\t.reg .b32 %f<3>, %r<4>;",
                                          "\t.reg .b32 %f<3>; // x", "\t.reg .v2 .b32 %f<3>;", "\t.reg.b32 %fd<3>;",
                                          "\t.reg .f32 %fd <3>;", "\t.reg .b32 %p<3>, %fd<2>;"};
    struct { const char *pre, *ty, *raw; } e[MAXD];
    char fill[40][4], tp[32][4];
    const char *tt[32];
    int n = 0, i, k, rt, nf = rnd(10) == 0 ? 28 + (int)rnd(8) : 0, order[4] = {0, 1, 2, 3}, tn = 0, amb[32], typed = 0;
    for (i = 0; i < nf; i++) {   /* distinct prefixes, no digits: gaa, gab, ... */
        sprintf(fill[i], "g%c%c", 'a' + i / 26, 'a' + i % 26);
        e[n].pre = fill[i]; e[n].ty = g_rt[rnd(4)]; e[n++].raw = NULL;
    }
    for (i = 3; i > 0; i--) { k = (int)rnd((uint32_t)i + 1); rt = order[i]; order[i] = order[k]; order[k] = rt; }
    for (i = 0; i < 4; i++) {
        const char *pre = g_pfx[order[i]] + 1, *right = g_rt[order[i]], *wrong = g_rt[(order[i] + 1 + (int)rnd(3)) % 4];
        switch (rnd(24)) {
        case 0: break;                                                        /* left out */
        case 1: e[n].pre = pre; e[n].ty = wrong; e[n++].raw = NULL; break;    /* mistyped */
        case 2: case 3:                                                       /* twice */
            e[n].pre = pre; e[n].ty = rnd(2) ? right : wrong; e[n++].raw = NULL;
            e[n].pre = pre; e[n].ty = e[n - 1].ty == wrong ? right : rnd(2) ? right : wrong; e[n++].raw = NULL;
            break;
        default: e[n].pre = pre; e[n].ty = right; e[n++].raw = NULL; break;
        }
        if (rnd(4) == 0) { e[n].pre = e[n].ty = NULL; e[n++].raw = ignored[rnd(sizeof ignored / sizeof ignored[0])]; }
    }
    *nd = n;
    for (i = 0; i < n; i++) {
        if (e[i].raw) {
            sb_puts(d, e[i].raw);
        } else {
            sb_printf(d, "%s.reg%s.%s%s%%%s<%u>;%s", ind[rnd(3)], rnd(2) ? " " : "\t", e[i].ty, gap[rnd(4)], e[i].pre,
                      1 + rnd(4000), rnd(6) ? "" : " ");
            for (k = 0; k < tn && strcmp(tp[k], e[i].pre) != 0; k++) {}   /* the header's table */
            if (k < tn) {
                amb[k] |= strcmp(tt[k], e[i].ty) != 0;
            } else if (tn < 32) {
                strcpy(tp[tn], e[i].pre); tt[tn] = e[i].ty; amb[tn++] = 0;
            }
        }
        sb_puts(d, eol);
        ends[i] = d->n;
    }
    for (rt = 0; rt < 4; rt++) {
        for (k = 0; k < tn && strcmp(tp[k], g_pfx[rt] + 1) != 0; k++) {}
        if (k < tn && !amb[k] && strcmp(tt[k], g_rt[rt]) == 0) typed |= 1 << rt;
    }
    return typed;
}

static void test_fuzz(void)
{
    int it, f, n_ok = 0, n_mut = 0, n_bound = 0, n_plain = 0, good = 1, agree = 1, n_untyped = 0;
    sb b = {0, 0, 0}, want[4], st[3], dl = {0, 0, 0};
    memset(want, 0, sizeof want);
    memset(st, 0, sizeof st);
    g_test = "fuzz";
    for (it = 0; it < 4000; it++) {
        gsite sites[3];
        const char *stubs[3], *eol = rnd(5) ? "\n" : "\r\n";
        int ns = 1 + (int)rnd(3), ni = 1 + (int)rnd(MAXI), i, j, mutated = rnd(3) == 0, nb = 0, total = 0;
        int nd, typed, cut;
        size_t ends[MAXD], cb;
        parsed p;
        for (i = 0; i < ns; i++) {
            gsite *s = &sites[i];
            int used = 0;
            s->nv = (int)rnd(MAXV + 1);
            for (j = 0; j < s->nv; j++) {   /* distinct registers */
                do s->reg[j] = (int)rnd(10); while (used >> s->reg[j] & 1);
                used |= 1 << s->reg[j];
                s->kind[j] = (int)rnd(3);
                s->rt[j] = (int)rnd(4);
            }
            gen_stub(s);
            stub_text(s, NULL, &st[i]);
            stubs[i] = s->missing ? NULL : st[i].p;
        }
        b.n = 0;
        sb_put(&b, "", 0);
        for (f = 0; f < 4; f++) { want[f].n = 0; sb_put(&want[f], "", 0); }
        /* the declarations: before the code, or some of them (the order kept) after it */
        dl.n = 0;
        sb_put(&dl, "", 0);
        typed = gen_decls(&dl, ends, &nd, eol);
        n_untyped += typed != 15;
        cut = rnd(4) ? nd : (int)rnd((uint32_t)nd + 1);
        cb = cut ? ends[cut - 1] : 0;
        sb_put(&b, dl.p, cb);
        for (f = 0; f < 4; f++) sb_put(&want[f], dl.p, cb);
        for (i = 0; i < ni || i < ns; i++, total++) {   /* sites first appear as s0, s1, ... */
            int si = i < ns ? i : (int)rnd((uint32_t)ns);
            nb += gen_instance(&b, want, &sites[si], si, eol, typed);
        }
        if (rnd(2)) {
            sb_puts(&b, "\tret;\n");
            for (f = 0; f < 4; f++) sb_puts(&want[f], "\tret;\n");
        }
        sb_put(&b, dl.p + cb, dl.n - cb);
        for (f = 0; f < 4; f++) sb_put(&want[f], dl.p + cb, dl.n - cb);
        if (mutated) { n_mut++; mutate(&b); if (rnd(2)) mutate(&b); }
        p = parse_n(b.p, b.n);
        if (!mutated) {
            good &= p.st == PTXINJ_OK && p.ctx.n_sites == (uint32_t)ns && p.ctx.n_instances == (uint32_t)total;
            n_bound += nb;
            n_plain += total - nb;
        }
        if (p.st == PTXINJ_OK) {
            /* a mutation may make sites of other names: they get a stub of their own */
            const char **sv = (const char **)calloc(p.ctx.n_sites + 1, sizeof *sv);
            for (i = 0; i < (int)p.ctx.n_sites; i++) sv[i] = i < ns ? stubs[i] : "\tadd.f32 %s1, %s1, %a;\n";
            n_ok++;
            for (f = 0; f < 4; f++) {
                uint32_t flags = (f & 1 ? PTXINJ_RENDER_TAG : 0) | (f >= 2 ? PTXINJ_RENDER_BIND : 0) |
                                 (rnd(2) ? PTXINJ_RENDER_PAIRS : 0);
                size_t len = 0;
                char *r = rend(&p, sv, flags, &len);
                good &= r != NULL;
                if (r && !mutated && (len != want[f].n || memcmp(r, want[f].p, len) != 0)) {
                    if (agree) printf("  fuzz case %d, flags %u:\n%s\n--- got:\n%s\n--- want:\n%s\n", it, flags, b.p, r, want[f].p);
                    agree = 0;
                }
                free(r);
            }
            free((void *)sv);
        }
        parsed_free(&p);
    }
    CHECK(good);
    CHECK(agree);
    CHECK(g_render_bad == 0);
    CHECK(n_bound > 2000 && n_plain > 2000 && n_untyped > 400);
    printf("fuzz: 4000 texts (%d mutated, %d with an operand prefix not typed), %d parsed; unmutated: %d "
           "instances bound, %d plain; all agree with the generator: %s\n", n_mut, n_untyped, n_ok, n_bound,
           n_plain, good && agree ? "yes" : "NO");
    free(b.p);
    free(dl.p);
    for (f = 0; f < 4; f++) free(want[f].p);
    for (f = 0; f < 3; f++) free(st[f].p);
}

int main(void)
{
    test_basic();
    test_tokens();
    test_frame_rules();
    test_stub_rules();
    test_types();
    test_shadow();
    test_mixed();
    test_scope();
    test_fuzz();
    return check_report();
}
