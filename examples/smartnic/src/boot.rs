//! Start-up on the `virt` board's boot core at EL1: the stack, FP/SIMD on
//! (Rust's aarch64 code uses its registers), the exception vectors,
//! `.bss` zeroed, then [`main`](crate) of the program through the symbol
//! `smartnic_main`. The MMU stays off: every access is then to Device
//! memory, which faults on unaligned accesses, and `aarch64-unknown-none`
//! compiles with `+strict-align` so none are made. Interrupts stay masked
//! (the NIC is polled), so the critical section here only has to keep them
//! masked.

use core::arch::{asm, global_asm};

global_asm!(
    ".section .text.boot, \"ax\"",
    ".global _start",
    "_start:",
    "    adrp x0, __stack_top",
    "    add x0, x0, :lo12:__stack_top",
    "    mov sp, x0",
    // CPACR_EL1.FPEN = 0b11: FP and SIMD instructions do not trap.
    "    mov x0, #(3 << 20)",
    "    msr cpacr_el1, x0",
    "    isb",
    "    adrp x0, smartnic_vectors",
    "    add x0, x0, :lo12:smartnic_vectors",
    "    msr vbar_el1, x0",
    "    adrp x0, __bss_start",
    "    add x0, x0, :lo12:__bss_start",
    "    adrp x1, __bss_end",
    "    add x1, x1, :lo12:__bss_end",
    "1:  cmp x0, x1",
    "    b.hs 2f",
    "    stp xzr, xzr, [x0], #16",
    "    b 1b",
    "2:  bl smartnic_main",
    "3:  wfe",
    "    b 3b",
    // The vector table: 16 entries of 0x80 bytes, 0x800-aligned. Every
    // exception is a bug here (interrupts are masked): report it and stop.
    ".section .text.vectors, \"ax\"",
    ".balign 0x800",
    "smartnic_vectors:",
    ".rept 16",
    ".balign 0x80",
    "    mrs x0, esr_el1",
    "    mrs x1, elr_el1",
    "    mrs x2, far_el1",
    "    b smartnic_trap",
    ".endr",
);

/// An exception: its syndrome, the address of the instruction and the
/// faulting address; prints them and leaves QEMU with a failure.
#[no_mangle]
extern "C" fn smartnic_trap(esr: u64, elr: u64, far: u64) -> ! {
    crate::finish(Err(format_args!(
        "exception: ESR_EL1 {esr:#x}, ELR_EL1 {elr:#x}, FAR_EL1 {far:#x}"
    )))
}

/// A critical section on one core: IRQ and FIQ masked, the previous mask
/// (DAIF) restored at the end.
struct MaskInterrupts;

critical_section::set_impl!(MaskInterrupts);

// SAFETY: one core runs; with IRQ and FIQ masked nothing else can run
// until `release` puts the saved mask back.
unsafe impl critical_section::Impl for MaskInterrupts {
    unsafe fn acquire() -> u64 {
        let daif: u64;
        // SAFETY: reads and sets the interrupt mask only. Not `nomem`: the
        // section must keep memory accesses inside it.
        unsafe {
            asm!("mrs {}, daif", "msr daifset, #3", out(reg) daif, options(nostack));
        }
        daif
    }

    unsafe fn release(daif: u64) {
        // SAFETY: puts back the mask `acquire` read.
        unsafe {
            asm!("msr daif, {}", in(reg) daif, options(nostack));
        }
    }
}
