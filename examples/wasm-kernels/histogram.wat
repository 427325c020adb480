;; A byte histogram as a flashpipe WebAssembly kernel (ABI version 1, docs/wasm-kernels.md),
;; written by hand in the WebAssembly text format: chunks are mapped in parallel, each to a
;; part of 256 little-endian u64 counts, and the parts are added up in offset order. The
;; file's result is the 2048 bytes of counts, shown as a digest (hexadecimal).
;;
;; Memory: bytes 0..2048 hold the file's counts, 2048..4096 the part of the last map call,
;; and the input buffer starts at 65536 (grown to fit the largest chunk).
(module
  (memory (export "memory") 2)

  (func (export "flashpipe_abi_version") (result i32) (i32.const 1))
  ;; 1: chunks in parallel (map per chunk, reduce parts in offset order).
  (func (export "flashpipe_schedule") (result i32) (i32.const 1))
  ;; 0: the result is a digest.
  (func (export "flashpipe_result_kind") (result i32) (i32.const 0))

  ;; The input buffer at 65536, with room for $length bytes.
  (func (export "flashpipe_input_buffer") (param $length i32) (result i32)
    (local $pages i32)
    (local.set $pages
      (i32.add (i32.const 1)
        (i32.shr_u (i32.add (local.get $length) (i32.const 65535)) (i32.const 16))))
    (if (i32.gt_u (local.get $pages) (memory.size))
      (then
        (if (i32.eq (memory.grow (i32.sub (local.get $pages) (memory.size))) (i32.const -1))
          (then (unreachable)))))
    (i32.const 65536))

  (func (export "flashpipe_file_start") (param $size i64)
    (memory.fill (i32.const 0) (i32.const 0) (i32.const 2048)))

  ;; Counts the chunk's bytes into the part at 2048; returns (2048 << 32) | 2048.
  (func (export "flashpipe_map") (param $offset i64) (param $length i32) (result i64)
    (local $at i32) (local $end i32) (local $slot i32)
    (memory.fill (i32.const 2048) (i32.const 0) (i32.const 2048))
    (local.set $at (i32.const 65536))
    (local.set $end (i32.add (i32.const 65536) (local.get $length)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $at) (local.get $end)))
        (local.set $slot
          (i32.add (i32.const 2048) (i32.shl (i32.load8_u (local.get $at)) (i32.const 3))))
        (i64.store (local.get $slot) (i64.add (i64.load (local.get $slot)) (i64.const 1)))
        (local.set $at (i32.add (local.get $at) (i32.const 1)))
        (br $next)))
    (i64.const 0x0000080000000800))

  ;; Adds a part (in the input buffer) to the file's counts.
  (func (export "flashpipe_reduce")
    (param $offset i64) (param $chunk_length i64) (param $part_length i32) (result i32)
    (local $at i32)
    (if (i32.ne (local.get $part_length) (i32.const 2048)) (then (return (i32.const 1))))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $at) (i32.const 2048)))
        (i64.store (local.get $at)
          (i64.add (i64.load (local.get $at))
                   (i64.load (i32.add (i32.const 65536) (local.get $at)))))
        (local.set $at (i32.add (local.get $at) (i32.const 8)))
        (br $next)))
    (i32.const 0))

  ;; The counts: pointer 0, length 2048.
  (func (export "flashpipe_file_end") (result i64) (i64.const 2048))
)
