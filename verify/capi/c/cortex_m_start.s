@ A bare-metal image's entry for a Cortex-M4 (thumbv7em-none-eabihf): calls
@ every function of vips_sdk/verify.h, so linking the static library with no
@ C library, no start files and no OS (arm-none-eabi-ld, `-e _start`) proves
@ the verifier needs nothing of them. It is linked, not run.
    .syntax unified
    .thumb
    .global _start
    .thumb_func
_start:
    ldr r0, =arena
    ldr r1, =32768
    bl vsdk_verify_init
    mov r4, r0
    bl vsdk_verify_state_size
    mov r0, r4
    ldr r1, =arena
    movs r2, #0
    ldr r3, =consumed
    ldr r5, =event
    push {r5}
    bl vsdk_verify_feed
    pop {r5}
    mov r0, r4
    movs r1, #0
    movs r2, #0
    bl vsdk_verify_output
    mov r0, r4
    ldr r1, =verdict
    bl vsdk_verify_finish
    mov r0, r4
    bl vsdk_verify_done
    movs r0, #0
    bl vsdk_verify_set_panic_hook
    b .
    .section .note.GNU-stack,"",%progbits
    .bss
    .balign 8
arena: .space 32768
consumed: .space 4
event: .space 160
verdict: .space 160
