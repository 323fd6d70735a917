#!/usr/bin/env bash
# The x86 levels this machine's CPU lacks (`avx-vnni`, `avx512`, `avx512-vnni`, `avx512-bf16`), run under Bochs, the
# one emulator within reach that has AVX-512: qemu's TCG has none, and Intel's SDE is not in the registries. Bochs
# 3.0 (built from Debian's source, with AVX-512 and AMX) emulates a whole PC with its `sapphire_rapids` CPU model;
# Debian's Linux boots from a CD image whose initramfs runs the library's kernel tests, linked statically, once, and
# powers off. The tests see the emulated CPU's CPUID, so the crate's own detection picks the levels, and the levels
# test runs each one. Correctness only: emulated timings mean nothing.
#
#   scripts/checks/check_avx512_bochs.sh [--model sapphire_rapids|tigerlake] [test filters...]
#
# What it cannot run: the `amx` level. Bochs 3.0 enumerates AMX without XFD, which Linux needs before it grants the
# tile data, and with XSAVES (the compacted format AMX state needs in Linux) the guest kernel stalls at boot
# in a storm of page faults, so the kernel is told to ignore AMX and XSAVES (`clearcpuid`), and the tests then
# print that `amx` did not run. The other `clearcpuid` features are ones neither the crate nor the tests use;
# clearing them keeps the boot to the paths known to work in Bochs. `tigerlake` (AVX-512 VNNI without BF16 or AVX-VNNI) checks the levels below.
#
# Needs: apt (bochs's build dependencies: g++, make; isolinux, syslinux-common, xorriso, busybox-static, cpio) and
# deb.debian.org for Bochs's source and the kernel package. About 15 minutes on 2 cores the first time (Bochs and a
# static test build), then 5 to 10 (boot about 2 minutes, the tests the rest). Work files: target/bochs.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
WORK=$ROOT/target/bochs
model=sapphire_rapids
if [[ "${1:-}" == "--model" ]]; then model="$2"; shift 2; fi
filters=("$@")
[[ ${#filters[@]} -gt 0 ]] || filters=(levels:: runtime::kernels quantization::)
mkdir -p "$WORK"
say() { echo "check_avx512_bochs: $*"; }

need=()
for tool in g++ make xorriso cpio busybox curl xz; do command -v "$tool" >/dev/null || need+=("$tool"); done
[[ -f /usr/lib/ISOLINUX/isolinux.bin ]] || need+=(isolinux)
if [[ ${#need[@]} -gt 0 ]]; then
    say "installing isolinux, syslinux-common, xorriso, busybox-static, cpio, g++, make"
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends isolinux syslinux-common xorriso busybox-static cpio g++ make \
        xz-utils curl >/dev/null
fi

# 1. Bochs 3.x from Debian's source package (bookworm's 2.7 has AVX-512 but no BF16, AVX-VNNI or AMX, and a
#    Tiger Lake model whose XSAVE layout Linux rejects).
#    Bochs 3.0 decodes vdpbf16ps's memory operand as a 4-byte scalar (OP_mVdq32), so a compressed 8-bit
#    displacement is scaled by 4 instead of the vector's 64 bytes and the instruction reads the wrong address: a
#    1·3 + 2·4 probe at 0x100(%rsp) gave 0, its register and {1to16} forms 11, and the avx512-bf16 kernel, which
#    folds its weight loads into that form, gave NaN. Its decoder entry gets the full-vector operand vpdpbusd has.
BOCHS=$WORK/bochs-src/bochs
EVEX_OPCODES=$WORK/bochs-src/cpu/decoder/ia_opcodes_evex.def
dpbf16ps_fixed() { grep -q 'BX_IA_EVEX_VDPBF16PS_VpsHdqWdq_Kmask.*OP_Hdq, OP_mVdq,' "$EVEX_OPCODES"; }
if [[ ! -x $BOCHS ]] || ! dpbf16ps_fixed; then
    # configure writes the Makefile last: a tree without one (a download or configure cut short) starts over.
    if [[ ! -f $WORK/bochs-src/Makefile ]]; then
        curl -fsS -o "$WORK/Sources.xz" http://deb.debian.org/debian/dists/trixie/main/source/Sources.xz
        orig=$(xz -dc "$WORK/Sources.xz" |
            awk '/^Package: bochs$/{p=1} p&&/^$/{p=0} p&&/orig.tar.xz$/{f=$3} END{print f}')
        [[ -n $orig ]] || { say "no bochs source in Debian trixie's index"; exit 1; }
        say "building Bochs from $orig"
        rm -rf "$WORK/bochs-src" && mkdir -p "$WORK/bochs-src"
        curl -fsS "http://deb.debian.org/debian/pool/main/b/bochs/$orig" |
            tar xJ -C "$WORK/bochs-src" --strip-components=1
        (cd "$WORK/bochs-src" &&
            ./configure --enable-x86-64 --enable-cpu-level=6 --enable-avx --enable-evex --enable-amx \
                --enable-all-optimizations --enable-repeat-speedups --enable-handlers-chaining --disable-debugger \
                --with-nogui --enable-pci >"$WORK/bochs-configure.log" 2>&1) ||
            { say "Bochs's configure failed: $WORK/bochs-configure.log"; exit 1; }
    fi
    if ! dpbf16ps_fixed; then
        sed -i '/BX_IA_EVEX_VDPBF16PS_VpsHdqWdq_Kmask/s/OP_Hdq, OP_mVdq32,/OP_Hdq, OP_mVdq,/' "$EVEX_OPCODES"
        dpbf16ps_fixed || { say "vdpbf16ps's decoder entry in $EVEX_OPCODES is not as expected"; exit 1; }
        # Bochs's makefiles do not track the .def files: a tree built before the fix rebuilds its CPU.
        find "$WORK/bochs-src/cpu" -name '*.o' -delete
    fi
    (cd "$WORK/bochs-src" && make -j"$(nproc)" >"$WORK/bochs-make.log" 2>&1) ||
        { say "Bochs build failed: $WORK/bochs-make.log"; exit 1; }
fi
# Debian's source package leaves out the prebuilt BIOS images; bookworm's bochsbios and vgabios hold them.
if [[ ! -f $WORK/bios/usr/share/bochs/BIOS-bochs-latest ]]; then
    (cd "$WORK" && rm -f bochsbios_*.deb vgabios_*.deb && apt-get download bochsbios vgabios >/dev/null 2>&1)
    for deb in "$WORK"/bochsbios_*.deb "$WORK"/vgabios_*.deb; do dpkg-deb -x "$deb" "$WORK/bios"; done
fi
romimage=$WORK/bios/usr/share/bochs/BIOS-bochs-latest
vgarom=$WORK/bios/usr/share/vgabios/vgabios.bin

# 2. A kernel: bookworm's cloud image (few drivers to probe under emulation).
if ! ls "$WORK"/kernel/boot/vmlinuz-* >/dev/null 2>&1; then
    pkg=$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image/ && !p {print $2; p=1}')
    say "kernel: $pkg"
    (cd "$WORK" && rm -f linux-image-*.deb && apt-get download "$pkg" >/dev/null 2>&1)
    dpkg-deb -x "$WORK"/linux-image-*.deb "$WORK/kernel"
fi

# 3. The library's unit tests, linked statically: the initramfs holds no C library.
say "building the static unit-test binary (target/bochs)"
binary=$(RUSTFLAGS="-C target-feature=+crt-static" cargo test --release --lib -p roformer \
    --target x86_64-unknown-linux-gnu --target-dir "$WORK" --no-run 2>&1 |
    sed -n 's/.*Executable unittests src\/lib.rs (\(.*\))/\1/p' | tail -1 || true)
[[ -n $binary ]] || { say "the test build failed"; exit 1; }
[[ $binary == /* ]] || binary=$ROOT/$binary

# 4. The CD: isolinux, the kernel, an initramfs of busybox, the tests and an init that runs them.
rm -rf "$WORK/rootfs" "$WORK/iso" && mkdir -p "$WORK"/rootfs/{bin,proc,sys,dev} "$WORK/iso"
cp "$(command -v busybox)" "$WORK/rootfs/bin/busybox"
for a in sh mount grep tr cat echo sleep poweroff; do ln -s busybox "$WORK/rootfs/bin/$a"; done
strip -o "$WORK/rootfs/tests" "$binary"
printf '%s\n' "${filters[@]}" >"$WORK/rootfs/filters"
cat >"$WORK/rootfs/init" <<'EOF'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
echo "== CPU flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx|amx)' | tr '\n' ' ')"
RUST_TEST_THREADS=1 /tests $(cat /filters)
echo "== tests exit: $?"
# The console drains its last lines before the power goes.
sleep 3
poweroff -f
EOF
chmod +x "$WORK/rootfs/init"
(cd "$WORK/rootfs" && find . | cpio -o -H newc --quiet) | gzip -1 >"$WORK/iso/initrd.img"
cp "$WORK"/kernel/boot/vmlinuz-* "$WORK/iso/vmlinuz"
cp /usr/lib/ISOLINUX/isolinux.bin /usr/lib/syslinux/modules/bios/ldlinux.c32 "$WORK/iso/"
clear=xsaves,xsavec,amx_tile,amx_int8,amx_bf16,waitpkg,ibt,user_shstk,la57,movdiri,movdir64b,serialize,fsrm
clear=$clear,avx512_fp16,tsxldtrk,cldemote,enqcmd
cat >"$WORK/iso/isolinux.cfg" <<EOF
DEFAULT linux
PROMPT 0
LABEL linux
  KERNEL /vmlinuz
  APPEND initrd=/initrd.img console=ttyS0,115200 rdinit=/init panic=0 mitigations=off nokaslr no5lvl dis_ucode_ldr clearcpuid=$clear quiet
EOF
xorriso -as mkisofs -quiet -o "$WORK/boot.iso" -b isolinux.bin -c boot.cat -no-emul-boot -boot-load-size 4 \
    -boot-info-table "$WORK/iso" 2>/dev/null

# 5. Bochs, until the guest powers off (Bochs stays up after that, so the serial log is watched).
cat >"$WORK/bochsrc" <<EOF
memory: guest=2048, host=2048
cpu: model=$model, count=1, ips=100000000
romimage: file=$romimage
vgaromimage: file=$vgarom
ata0-master: type=cdrom, path=$WORK/boot.iso, status=inserted
boot: cdrom
com1: enabled=1, mode=file, dev=$WORK/serial.log
display_library: nogui
log: $WORK/bochs.log
panic: action=fatal
error: action=ignore
info: action=ignore
clock: sync=none
EOF
rm -f "$WORK/serial.log"
say "booting Bochs ($model); the guest's console: $WORK/serial.log"
"$BOCHS" -q -f "$WORK/bochsrc" >"$WORK/bochs.stdout" 2>&1 </dev/null &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 720); do
    sleep 5
    grep -q "== tests exit" "$WORK/serial.log" 2>/dev/null && break
    kill -0 $pid 2>/dev/null || break
done
grep -E "^== |^test |not run here|^test result" "$WORK/serial.log" || true
status=$(sed -n 's/^== tests exit: \([0-9]*\).*/\1/p' "$WORK/serial.log" 2>/dev/null | tail -1)
[[ -n $status ]] || { say "the tests did not finish: $WORK/serial.log, $WORK/bochs.log"; exit 1; }
exit "$status"
