//! The functions of a CUBIN and how many bytes of machine code each has, read from its
//! ELF symbol table (no CUDA tools needed).
//!
//! A megakernel's tile groups, compiled as separate functions (`ptxas_report --per-group`),
//! appear as `$et_main$<mangled et_group_N>` symbols; their sizes say how much code each
//! group's tasks bring through the SM's instruction caches (RESULTS run 49: on an H100,
//! about 32 KB run at the issue rate, about 128 KB come back at 75–107 cycles a KB, the rest
//! from L2).

/// One function symbol of a CUBIN.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    /// The symbol's name, as the ELF symbol table spells it.
    pub name: String,
    /// Its machine code in bytes (the symbol's size).
    pub bytes: u64,
}

const SHT_SYMTAB: u32 = 2;
const STT_FUNC: u8 = 2;
const SECTION_HEADER_BYTES: usize = 64;
const SYMBOL_BYTES: usize = 24;

/// Every function symbol of `image` (a 64-bit little-endian ELF, as NVRTC writes a CUBIN)
/// with its size, in symbol-table order; an error names what is malformed.
pub fn functions(image: &[u8]) -> Result<Vec<Function>, String> {
    if image.len() < 64 || &image[..4] != b"\x7fELF" || image[4] != 2 || image[5] != 1 {
        return Err("not a 64-bit little-endian ELF image (a CUBIN)".into());
    }
    let section_offset = to_usize(u64_at(image, 0x28)?)?;
    let section_count = usize::from(u16_at(image, 0x3c)?);
    let section = |i: usize| -> Result<&[u8], String> {
        let at = section_offset + i * SECTION_HEADER_BYTES;
        image.get(at..at + SECTION_HEADER_BYTES).ok_or_else(|| format!("section header {i} lies past the image"))
    };
    let contents = |header: &[u8]| -> Result<&[u8], String> {
        let (at, len) = (to_usize(u64_at(header, 0x18)?)?, to_usize(u64_at(header, 0x20)?)?);
        image.get(at..at + len).ok_or_else(|| "a section's contents lie past the image".to_string())
    };
    let mut found = Vec::new();
    for i in 0..section_count {
        let header = section(i)?;
        if u32_at(header, 4)? != SHT_SYMTAB {
            continue;
        }
        let symbols = contents(header)?;
        let names = contents(section(to_usize(u64::from(u32_at(header, 0x28)?))?)?)?;
        for symbol in symbols.chunks_exact(SYMBOL_BYTES) {
            if symbol[4] & 0xf != STT_FUNC {
                continue;
            }
            let name_at = to_usize(u64::from(u32_at(symbol, 0)?))?;
            let name = names.get(name_at..).ok_or("a symbol's name lies past its string table")?;
            let end = name.iter().position(|&b| b == 0).ok_or("a symbol's name has no terminating NUL")?;
            found.push(Function {
                name: String::from_utf8_lossy(&name[..end]).into_owned(),
                bytes: u64_at(symbol, 16)?,
            });
        }
    }
    Ok(found)
}

fn bytes_at<const N: usize>(data: &[u8], at: usize) -> Result<[u8; N], String> {
    data.get(at..at + N).and_then(|b| b.try_into().ok()).ok_or_else(|| format!("the image ends before byte {}", at + N))
}
fn u16_at(data: &[u8], at: usize) -> Result<u16, String> {
    bytes_at(data, at).map(u16::from_le_bytes)
}
fn u32_at(data: &[u8], at: usize) -> Result<u32, String> {
    bytes_at(data, at).map(u32::from_le_bytes)
}
fn u64_at(data: &[u8], at: usize) -> Result<u64, String> {
    bytes_at(data, at).map(u64::from_le_bytes)
}
fn to_usize(v: u64) -> Result<usize, String> {
    usize::try_from(v).map_err(|_| format!("offset {v} does not fit this machine's address space"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ELF image with a null section, a string table and a symbol table of `symbols`
    /// (name, ELF type, size).
    fn image(symbols: &[(&str, u8, u64)]) -> Vec<u8> {
        let mut strings = vec![0u8];
        let mut table = vec![0u8; SYMBOL_BYTES]; // symbol 0 is the null symbol
        for &(name, kind, size) in symbols {
            let mut s = vec![0u8; SYMBOL_BYTES];
            s[..4].copy_from_slice(&(strings.len() as u32).to_le_bytes());
            s[4] = kind;
            s[16..24].copy_from_slice(&size.to_le_bytes());
            table.extend(s);
            strings.extend(name.as_bytes());
            strings.push(0);
        }
        let mut elf = vec![0u8; 64];
        elf[..6].copy_from_slice(b"\x7fELF\x02\x01");
        let strings_at = elf.len();
        elf.extend(&strings);
        let table_at = elf.len();
        elf.extend(&table);
        let headers_at = elf.len();
        elf[0x28..0x30].copy_from_slice(&(headers_at as u64).to_le_bytes());
        elf[0x3c..0x3e].copy_from_slice(&3u16.to_le_bytes());
        let header = |kind: u32, at: usize, len: usize, link: u32| {
            let mut h = vec![0u8; SECTION_HEADER_BYTES];
            h[4..8].copy_from_slice(&kind.to_le_bytes());
            h[0x18..0x20].copy_from_slice(&(at as u64).to_le_bytes());
            h[0x20..0x28].copy_from_slice(&(len as u64).to_le_bytes());
            h[0x28..0x2c].copy_from_slice(&link.to_le_bytes());
            h
        };
        elf.extend(header(0, 0, 0, 0));
        elf.extend(header(3, strings_at, strings.len(), 0));
        elf.extend(header(SHT_SYMTAB, table_at, table.len(), 1));
        elf
    }

    #[test]
    fn reads_the_function_symbols_and_their_sizes() {
        let elf = image(&[
            ("et_main", STT_FUNC, 215_936),
            ("a_section", 3, 0),
            ("$et_main$_Z10et_group_2v", STT_FUNC, 30_464),
        ]);
        let found = functions(&elf).unwrap();
        assert_eq!(
            found,
            vec![
                Function { name: "et_main".into(), bytes: 215_936 },
                Function { name: "$et_main$_Z10et_group_2v".into(), bytes: 30_464 },
            ]
        );
    }

    #[test]
    fn a_truncated_or_foreign_image_is_an_error() {
        assert!(functions(b"not an elf").unwrap_err().contains("not a 64-bit"));
        let elf = image(&[("et_main", STT_FUNC, 16)]);
        let cut = &elf[..elf.len() - 10];
        assert!(functions(cut).unwrap_err().contains("past the image"), "{:?}", functions(cut));
        let mut bad_name = elf.clone();
        let table_at = 64 + "et_main".len() + 2;
        bad_name[table_at + SYMBOL_BYTES..table_at + SYMBOL_BYTES + 4].copy_from_slice(&9999u32.to_le_bytes());
        assert!(functions(&bad_name).unwrap_err().contains("string table"));
    }
}
