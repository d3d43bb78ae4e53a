//! NumPy `.npy` files of f32 (format version 1.0), for logits that Python compares.

use crate::error::{Error, Result};
use et_core::Tensor;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The bytes of an `.npy` file holding `t` (little-endian f32, C order). The header is
/// padded with spaces and ends in a newline so that the data starts at a multiple of 64
/// bytes, as NumPy writes it.
pub fn npy_bytes(t: &Tensor<f32>) -> Vec<u8> {
    let dims: Vec<String> = t.shape().iter().map(usize::to_string).collect();
    let shape = if dims.len() == 1 { format!("({},)", dims[0]) } else { format!("({})", dims.join(", ")) };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    // magic (6) + version (2) + header length (2) + header + '\n'
    let unpadded = 10 + header.len() + 1;
    header.extend(std::iter::repeat_n(' ', unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + 4 * t.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend(t.as_slice().iter().flat_map(|v| v.to_le_bytes()));
    out
}

/// Writes `t` to `path` as an `.npy` file.
pub fn write_npy(path: &Path, t: &Tensor<f32>) -> Result<()> {
    NpyFile::create(path)?.write(t)
}

/// An `.npy` file opened ahead of the data it will hold, so that a path that cannot be
/// written fails before a long run rather than after it. Nothing is truncated until
/// [`NpyFile::write`]: a run that fails leaves an earlier file at the path as it was, and
/// removes the empty file it created.
pub struct NpyFile {
    file: File,
    path: PathBuf,
    /// Whether `create` made the file (and dropping it unwritten removes it).
    created: bool,
    written: bool,
}

impl NpyFile {
    /// Opens `path` for writing, creating it if it does not exist.
    pub fn create(path: &Path) -> Result<Self> {
        let created = !path.exists();
        let file = OpenOptions::new().write(true).create(true).truncate(false).open(path).map_err(Error::io(path))?;
        Ok(NpyFile { file, path: path.to_path_buf(), created, written: false })
    }

    /// Replaces the file's contents with `t`.
    pub fn write(mut self, t: &Tensor<f32>) -> Result<()> {
        self.written = true;
        let bytes = npy_bytes(t);
        (self.file.set_len(0))
            .and_then(|()| self.file.write_all(&bytes))
            .and_then(|()| self.file.flush())
            .map_err(Error::io(&self.path))
    }

    /// The path the file was opened at.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for NpyFile {
    fn drop(&mut self) {
        if self.created && !self.written {
            // best effort: the run's own error is what the user needs to see
            std::fs::remove_file(&self.path).ok();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_data_follow_the_format() {
        let t = Tensor::from_vec(&[2, 3], vec![1.0, -2.0, 0.5, 0.0, 3.25, -0.125]).unwrap();
        let bytes = npy_bytes(&t);
        assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
        let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        assert_eq!((10 + len) % 64, 0);
        let header = std::str::from_utf8(&bytes[10..10 + len]).unwrap();
        assert!(header.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"), "{header}");
        assert!(header.ends_with(" \n"));
        let data: Vec<f32> =
            bytes[10 + len..].chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(data, t.as_slice());
    }

    #[test]
    fn one_dimensional_shape_is_a_one_tuple() {
        let bytes = npy_bytes(&Tensor::from_vec(&[4], vec![0.0; 4]).unwrap());
        let header = String::from_utf8_lossy(&bytes[10..]);
        assert!(header.contains("'shape': (4,), }"));
        let path = std::env::temp_dir().join(format!("llama-npy-{}.npy", std::process::id()));
        write_npy(&path, &Tensor::from_vec(&[4], vec![0.0; 4]).unwrap()).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn an_earlier_file_survives_until_the_write_and_an_unwritten_new_one_is_removed() {
        let path = std::env::temp_dir().join(format!("llama-npy-keep-{}.npy", std::process::id()));
        std::fs::write(&path, b"earlier").unwrap();
        drop(NpyFile::create(&path).unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), b"earlier");
        let t = Tensor::from_vec(&[1], vec![2.0]).unwrap();
        NpyFile::create(&path).unwrap().write(&t).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), npy_bytes(&t));
        std::fs::remove_file(&path).unwrap();
        drop(NpyFile::create(&path).unwrap());
        assert!(!path.exists());
    }

    #[test]
    fn an_unwritable_path_fails_at_create() {
        let path = std::env::temp_dir().join(format!("llama-npy-missing-{}", std::process::id())).join("x.npy");
        let err = NpyFile::create(&path).err().expect("a file in a missing directory cannot be created");
        assert!(err.to_string().contains(&path.display().to_string()), "{err}");
    }
}
