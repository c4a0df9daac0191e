/* AArch64 raw context switch.  Saves what AAPCS64 says a callee must
 * preserve: x19-x29, x30 (lr), sp, d8-d15, and FPCR. */
        .text

/* void px__ctx_swap(void **save, void *sp) */
        .globl  px__ctx_swap
        .hidden px__ctx_swap
        .type   px__ctx_swap, %function
        .p2align 4
px__ctx_swap:
        .cfi_startproc
        sub     sp, sp, #176
        stp     x19, x20, [sp, #0]
        stp     x21, x22, [sp, #16]
        stp     x23, x24, [sp, #32]
        stp     x25, x26, [sp, #48]
        stp     x27, x28, [sp, #64]
        stp     x29, x30, [sp, #80]
        stp     d8,  d9,  [sp, #96]
        stp     d10, d11, [sp, #112]
        stp     d12, d13, [sp, #128]
        stp     d14, d15, [sp, #144]
        mrs     x9, fpcr
        str     x9, [sp, #160]
        mov     x9, sp
        str     x9, [x0]
        mov     sp, x1
        ldp     x19, x20, [sp, #0]
        ldp     x21, x22, [sp, #16]
        ldp     x23, x24, [sp, #32]
        ldp     x25, x26, [sp, #48]
        ldp     x27, x28, [sp, #64]
        ldp     x29, x30, [sp, #80]
        ldp     d8,  d9,  [sp, #96]
        ldp     d10, d11, [sp, #112]
        ldp     d12, d13, [sp, #128]
        ldp     d14, d15, [sp, #144]
        ldr     x9, [sp, #160]
        msr     fpcr, x9
        add     sp, sp, #176
        ret
        .cfi_endproc
        .size   px__ctx_swap, .-px__ctx_swap

/* First code on a new stack, reached by px__ctx_swap's ret; x19 = entry,
 * x20 = its argument, both callee-saved across px__ctx_start; x29 = 0 ends
 * backtraces. */
        .globl  px__ctx_trampoline
        .hidden px__ctx_trampoline
        .type   px__ctx_trampoline, %function
        .p2align 4
px__ctx_trampoline:
        .cfi_startproc
        .cfi_undefined x30
        bl      px__ctx_start
        mov     x0, x20
        blr     x19
        brk     #0
        .cfi_endproc
        .size   px__ctx_trampoline, .-px__ctx_trampoline

/* void px__ctx_fpctl(void *out8): the caller's FPCR, inherited by new
 * contexts. */
        .globl  px__ctx_fpctl
        .hidden px__ctx_fpctl
        .type   px__ctx_fpctl, %function
        .p2align 4
px__ctx_fpctl:
        mrs     x9, fpcr
        str     x9, [x0]
        ret
        .size   px__ctx_fpctl, .-px__ctx_fpctl

        .section .note.GNU-stack,"",%progbits
