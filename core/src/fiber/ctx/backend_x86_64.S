/* x86-64 SysV raw context switch.  Saves what the ABI says a callee must
 * preserve: rbx rbp r12-r15, rsp, and the MXCSR / x87 control words. */
        .text

/* void px__ctx_swap(void **save, void *sp) */
        .globl  px__ctx_swap
        .hidden px__ctx_swap
        .type   px__ctx_swap, @function
        .p2align 4
px__ctx_swap:
        .cfi_startproc
        pushq   %rbp
        pushq   %rbx
        pushq   %r12
        pushq   %r13
        pushq   %r14
        pushq   %r15
        subq    $8, %rsp
        stmxcsr (%rsp)
        fnstcw  4(%rsp)
        movq    %rsp, (%rdi)
        movq    %rsi, %rsp
        ldmxcsr (%rsp)
        fldcw   4(%rsp)
        addq    $8, %rsp
        popq    %r15
        popq    %r14
        popq    %r13
        popq    %r12
        popq    %rbx
        popq    %rbp
        /* pop + jmp, not ret: ret would always mispredict, since the return
         * stack buffer holds the call into *this* context's swap */
        popq    %rcx
        jmp     *%rcx
        .cfi_endproc
        .size   px__ctx_swap, .-px__ctx_swap

/* First code on a new stack, reached by px__ctx_swap's pop + jmp (its address
 * is where the swap pops the resume address); r12 = entry, r13 = its
 * argument, both callee-saved across px__ctx_start.  The entry's frame is
 * the first of the stack: no C frame of ours lies under a fiber's.
 * rbp is 0 and the fake return address above is 0, ending backtraces. */
        .globl  px__ctx_trampoline
        .hidden px__ctx_trampoline
        .type   px__ctx_trampoline, @function
        .p2align 4
px__ctx_trampoline:
        .cfi_startproc
        .cfi_undefined rip
        call    px__ctx_start@PLT
        movq    %r13, %rdi
        call    *%r12
        ud2
        .cfi_endproc
        .size   px__ctx_trampoline, .-px__ctx_trampoline

/* void px__ctx_fpctl(void *out8): the caller's MXCSR and x87 control word,
 * inherited by new contexts. */
        .globl  px__ctx_fpctl
        .hidden px__ctx_fpctl
        .type   px__ctx_fpctl, @function
        .p2align 4
px__ctx_fpctl:
        .cfi_startproc
        stmxcsr (%rdi)
        fnstcw  4(%rdi)
        ret
        .cfi_endproc
        .size   px__ctx_fpctl, .-px__ctx_fpctl

        .section .note.GNU-stack,"",@progbits
