use tlx::prelude::*;

// Named readers are declared with the pipe.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn wrong_reader(out: Ptr<f32>) {
    let bufs = local_alloc([16, 16], f32, 2);
    let p = pipe!(capacity = 2, readers = ["mma", "epilogue"], x = bufs);
    let reader = p.reader("softmax");
    let ready = reader.wait(0);
    store(out, 0.0);
}

fn main() {}
