//! Embedding lookup (the rows of a token-embedding table picked by token ids) and the
//! next step's positions.

use super::decode_cuda;
use crate::dtype::bf16;
use crate::tile::{TileMut, TileRef};

crate::tile_op! { cuda = decode_cuda!(r#"
template <class E, class I, class Y>
__device__ void embed(E table, I ids, Y out) {
    const int V = table.shape[0], D = table.shape[1], B = ids.shape[0], per = (D + 7) / 8;
    const bool vec = vec_rows(table.ptr, table.stride[0], table.stride[1]) && vec_rows(out.ptr, out.stride[0], out.stride[1]);
    for (int e = threadIdx.x; e < B * per; e += blockDim.x) {
        const int b = e / per, k = (e % per) * 8, id = ids(b);
        uint4 v = make_uint4(0, 0, 0, 0);
        if (id >= 0 && id < V) v = load8<true>(table.ptr + (long long)id * table.stride[0], k, D, table.stride[1], vec);
        // the row's bits as they are (a NaN too), as the CPU reference copies them
        store8(out.ptr + b * out.stride[0], k, D, out.stride[1], vec, v);
    }
}
"#);
    contract {
        out[0] == ids[0] => "out must have one row per token id",
        out[1] == table[1] => "out must have the table's columns (the model dimension)",
    }
    /// `out[b, :] = table[ids[b], :]`: `table` is the whole `V x D` embedding table (never
    /// written during the launch), `ids` the `B` token ids; an id outside `0 .. V` gives a
    /// row of zeros.
    pub fn embed(table: TileRef<'_, bf16, 2>, ids: TileRef<'_, i32, 1>, mut out: TileMut<'_, bf16, 2>) {
        let [v, d] = table.shape();
        for b in 0..ids.shape()[0] {
            let id = ids.get([b]);
            for k in 0..d {
                let x = if id >= 0 && (id as usize) < v { table.get([id as usize, k]) } else { bf16::ZERO };
                out.set([b, k], x);
            }
        }
    }
}

crate::tile_op! { cuda = decode_cuda!(r#"
template <class P, class Y>
__device__ void next_positions(P pos, Y out) {
    for (int b = threadIdx.x; b < pos.shape[0]; b += blockDim.x) out(b) = pos(b) + 1;
}
"#);
    contract { out[0] == pos[0] => "out must have one element per position" }
    /// `out[b] = pos[b] + 1`: the positions of the next decode step, written on the device
    /// so that a step of generation needs no upload (the decoder swaps `pos` and `out`).
    pub fn next_positions(pos: TileRef<'_, i32, 1>, mut out: TileMut<'_, i32, 1>) {
        for b in 0..pos.shape()[0] {
            out.set([b], pos.get([b]).wrapping_add(1));
        }
    }
}
