use et_core::prelude::*;
fn k() {
    tile!(p[i] in [4] {});
    let e = event!([4]);
}

fn main() {}
