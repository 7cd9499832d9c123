//! Where each source line of a loaded program starts and ends in its JIT code, from the
//! kernel's `jited_line_info` and the program's BTF: a profiler's samples in a BPF program are
//! JIT addresses, and this turns them into `file:line` (`cargo xtask profile-xdp`, through
//! `GSLB_BENCH_XDP_LINES` of `bench xdp`). aya 0.16 reads neither table, and bpftool needs
//! libbfd (which Debian's lacks) to print them.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

use aya::programs::Xdp;

use super::syscall::{BPF_BTF_GET_FD_BY_ID, BPF_OBJ_GET_INFO_BY_FD, bpf};
use super::{DataplaneError, Result};

/// One source line's run of JIT code: `start..end` (kernel addresses).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JitLine {
    pub start: u64,
    pub end: u64,
    /// As the compiler recorded it (relative to the workspace, or absolute).
    pub file: String,
    pub line: u32,
}

/// The head of `struct bpf_prog_info` (include/uapi/linux/bpf.h) up to the JIT line table;
/// the kernel fills what it has and leaves the rest to this length.
#[repr(C)]
#[derive(Default)]
struct ProgInfo {
    prog_type: u32,
    id: u32,
    tag: [u8; 8],
    jited_prog_len: u32,
    xlated_prog_len: u32,
    jited_prog_insns: u64,
    xlated_prog_insns: u64,
    load_time: u64,
    created_by_uid: u32,
    nr_map_ids: u32,
    map_ids: u64,
    name: [u8; 16],
    ifindex: u32,
    gpl_compatible: u32,
    netns_dev: u64,
    netns_ino: u64,
    nr_jited_ksyms: u32,
    nr_jited_func_lens: u32,
    jited_ksyms: u64,
    jited_func_lens: u64,
    btf_id: u32,
    func_info_rec_size: u32,
    func_info: u64,
    nr_func_info: u32,
    nr_line_info: u32,
    line_info: u64,
    jited_line_info: u64,
    nr_jited_line_info: u32,
    line_info_rec_size: u32,
    jited_line_info_rec_size: u32,
    /// `nr_prog_tags`, not asked for: zero.
    nr_prog_tags: u32,
}
const _: () = assert!(size_of::<ProgInfo>() == 184);

/// `struct bpf_line_info`: one source line at an instruction.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct LineInfo {
    insn_off: u32,
    file_name_off: u32,
    line_off: u32,
    /// Line << 10 | column.
    line_col: u32,
}

/// `struct bpf_btf_info`.
#[repr(C)]
#[derive(Default)]
struct BtfInfo {
    btf: u64,
    btf_size: u32,
    id: u32,
    name: u64,
    name_len: u32,
    kernel_btf: u32,
}

/// The `info` member of `bpf_attr` for `BPF_OBJ_GET_INFO_BY_FD`.
#[repr(C)]
struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// Fills `info` for the object `fd`.
///
/// # Safety
/// The pointers in `info` point to buffers of the lengths it gives, live through the call.
unsafe fn object_info<T>(fd: i32, info: &mut T) -> std::io::Result<()> {
    let mut attr = InfoAttr {
        bpf_fd: fd as u32,
        info_len: size_of::<T>() as u32,
        info: std::ptr::from_mut(info) as u64,
    };
    // SAFETY: `attr.info` is `info`, `info_len` bytes; what it points to, the caller's contract.
    unsafe { bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr) }.map(drop)
}

fn syscall_error(call: &'static str) -> impl FnOnce(std::io::Error) -> DataplaneError {
    move |io_error| DataplaneError::JitLines {
        source: aya::sys::SyscallError { call, io_error },
    }
}

/// A loaded program's JIT code, as source lines.
#[derive(Debug)]
pub struct JitLines {
    /// Bytes of JIT code in all (every function's).
    pub code_len: u64,
    /// Sorted by address, not overlapping.
    pub lines: Vec<JitLine>,
}

/// The JIT line table of `program`; needs root (the kernel gives JIT
/// addresses to `CAP_SYS_ADMIN` only: to others they read 0, and the table comes out empty).
pub fn jit_lines(program: &Xdp) -> Result<JitLines> {
    let fd = program
        .fd()
        .map_err(|source| DataplaneError::Program {
            name: "being profiled",
            source: Box::new(source),
        })?
        .as_fd()
        .as_raw_fd();
    let mut counts = ProgInfo::default();
    // SAFETY: no pointers: the kernel fills in the counts.
    unsafe { object_info(fd, &mut counts) }.map_err(syscall_error("bpf_prog_get_info_by_fd"))?;
    let mut ksyms = vec![0u64; counts.nr_jited_ksyms as usize];
    let mut func_lens = vec![0u32; counts.nr_jited_func_lens as usize];
    let mut lines = vec![LineInfo::default(); counts.nr_line_info as usize];
    let mut jited = vec![0u64; counts.nr_jited_line_info as usize];
    let mut info = ProgInfo {
        nr_jited_ksyms: ksyms.len() as u32,
        jited_ksyms: ksyms.as_mut_ptr() as u64,
        nr_jited_func_lens: func_lens.len() as u32,
        jited_func_lens: func_lens.as_mut_ptr() as u64,
        nr_line_info: lines.len() as u32,
        line_info: lines.as_mut_ptr() as u64,
        line_info_rec_size: size_of::<LineInfo>() as u32,
        nr_jited_line_info: jited.len() as u32,
        jited_line_info: jited.as_mut_ptr() as u64,
        jited_line_info_rec_size: size_of::<u64>() as u32,
        ..ProgInfo::default()
    };
    // SAFETY: each pointer is a vector of the count given, of the record size given.
    unsafe { object_info(fd, &mut info) }.map_err(syscall_error("bpf_prog_get_info_by_fd"))?;
    let strings = btf_strings(counts.btf_id)?;
    let functions: Vec<(u64, u64)> = ksyms
        .iter()
        .zip(&func_lens)
        .map(|(&start, &len)| (start, start + u64::from(len)))
        .collect();
    Ok(JitLines {
        code_len: functions.iter().map(|(start, end)| end - start).sum(),
        lines: line_table(&functions, &lines, &jited, &strings),
    })
}

/// The string section of BTF object `id` (where line records name their files).
fn btf_strings(id: u32) -> Result<Vec<u8>> {
    let mut attr = [id, 0, 0]; // btf_id, next_id, open_flags
    // SAFETY: no pointers; the result is a new descriptor.
    let fd = unsafe { bpf(BPF_BTF_GET_FD_BY_ID, &mut attr) }
        .map_err(syscall_error("bpf_btf_get_fd_by_id"))?;
    // SAFETY: a descriptor the kernel just made, owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let mut size = BtfInfo::default();
    // SAFETY: no buffer: the kernel fills in the size.
    unsafe { object_info(fd.as_raw_fd(), &mut size) }
        .map_err(syscall_error("bpf_btf_get_info_by_fd"))?;
    let mut raw = vec![0u8; size.btf_size as usize];
    let mut info = BtfInfo {
        btf: raw.as_mut_ptr() as u64,
        btf_size: raw.len() as u32,
        ..BtfInfo::default()
    };
    // SAFETY: `btf` is `btf_size` bytes.
    unsafe { object_info(fd.as_raw_fd(), &mut info) }
        .map_err(syscall_error("bpf_btf_get_info_by_fd"))?;
    // `struct btf_header`: magic u16, version u8, flags u8, hdr_len, type_off, type_len,
    // str_off, str_len (u32 each).
    let word = |at: usize| {
        raw.get(at..at + 4)
            .map(|b| u32::from_ne_bytes(b.try_into().expect("4 bytes")) as usize)
    };
    let strings = (|| {
        let start = word(4)? + word(16)?;
        raw.get(start..start + word(20)?).map(<[u8]>::to_vec)
    })();
    strings.ok_or_else(|| {
        syscall_error("bpf_btf_get_info_by_fd")(std::io::Error::other(
            "BTF string section out of bounds",
        ))
    })
}

/// The string at `off` of a BTF string section ("?" past it).
fn btf_string(strings: &[u8], off: u32) -> String {
    strings
        .get(off as usize..)
        .map(|s| s.split(|&b| b == 0).next().unwrap_or_default())
        .map_or_else(|| "?".into(), |s| String::from_utf8_lossy(s).into_owned())
}

/// Joins the kernel's tables: record `i` of `lines` starts at `jited[i]`, and runs to the next
/// record's start in the same function (`functions`: start..end of each), or the function's
/// end. Records at the same address: the last one holds the code.
fn line_table(
    functions: &[(u64, u64)],
    lines: &[LineInfo],
    jited: &[u64],
    strings: &[u8],
) -> Vec<JitLine> {
    let mut starts: Vec<(u64, &LineInfo)> = jited.iter().copied().zip(lines).collect();
    starts.sort_by_key(|&(addr, _)| addr);
    let mut table: Vec<JitLine> = Vec::with_capacity(starts.len());
    for (i, &(start, line)) in starts.iter().enumerate() {
        let Some(&(_, func_end)) = functions.iter().find(|&&(s, e)| (s..e).contains(&start)) else {
            continue;
        };
        let end = starts
            .get(i + 1)
            .map_or(func_end, |&(next, _)| next.min(func_end));
        if end > start {
            table.push(JitLine {
                start,
                end,
                file: btf_string(strings, line.file_name_off),
                line: line.line_col >> 10,
            });
        }
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(file_name_off: u32, line: u32) -> LineInfo {
        LineInfo {
            file_name_off,
            line_col: (line << 10) | 5,
            ..LineInfo::default()
        }
    }

    fn run(start: u64, end: u64, file: &str, line: u32) -> JitLine {
        JitLine {
            start,
            end,
            file: file.into(),
            line,
        }
    }

    /// Two functions; records out of order, two at one address (the second holds the code),
    /// one outside every function (dropped); the last of each function runs to its end.
    #[test]
    fn records_become_runs_up_to_the_next_record_or_the_function_end() {
        let strings = b"\0a.rs\0b.rs\0";
        let lines = [
            at(1, 10),
            at(1, 11),
            at(6, 3),
            at(1, 12),
            at(6, 4),
            at(1, 99),
        ];
        let jited = [0x100, 0x110, 0x200, 0x110, 0x208, 0x900];
        let got = line_table(&[(0x100, 0x120), (0x200, 0x230)], &lines, &jited, strings);
        assert_eq!(
            got,
            [
                run(0x100, 0x110, "a.rs", 10),
                run(0x110, 0x120, "a.rs", 12),
                run(0x200, 0x208, "b.rs", 3),
                run(0x208, 0x230, "b.rs", 4),
            ]
        );
        assert_eq!(btf_string(strings, 400), "?");
    }

    /// The answering program as loaded: its table covers all its JIT code, line by line, in
    /// the crate's own files.
    #[test]
    fn the_loaded_program_maps_every_jit_byte_to_a_source_line() {
        if !super::super::can_load_xdp() {
            return;
        }
        let dp = super::super::Dataplane::load(None).expect("loading the XDP object");
        let code = jit_lines(dp.program()).expect("reading the JIT line table");
        let table = &code.lines;
        assert!(table.len() > 100, "{} runs", table.len());
        for pair in table.windows(2) {
            assert!(pair[0].end <= pair[1].start, "{pair:?} overlap");
        }
        let covered: u64 = table.iter().map(|l| l.end - l.start).sum();
        // Only the prologue before the first record is outside every run.
        assert!(
            covered <= code.code_len && covered + 64 >= code.code_len,
            "{covered} of {} bytes",
            code.code_len
        );
        // The entry (main.rs) and the hand-written parse, at lines the files have.
        for file in ["gslb-ebpf/src/main.rs", "gslb-ebpf/src/parse.rs"] {
            let source = std::fs::read_to_string(format!("../{file}")).expect(file);
            let lines = source.lines().count() as u32;
            assert!(
                table
                    .iter()
                    .any(|l| l.file.ends_with(file) && (1..=lines).contains(&l.line)),
                "no line of {file} in {:?}",
                &table[..4]
            );
        }
    }
}
