//! The accepted forms (`pass/`): idioms the compiler and the protocol
//! checker must let through. Each file is a module of this test, so they
//! compile with the workspace's build, and each `main` runs as trybuild's
//! pass cases would.

#[path = "pass/cluster_exchange.rs"]
mod cluster_exchange;
#[path = "pass/configs_and_launch.rs"]
mod configs_and_launch;
#[path = "pass/protocol_carried_accumulator_wait.rs"]
mod protocol_carried_accumulator_wait;
#[path = "pass/protocol_idioms.rs"]
mod protocol_idioms;
#[path = "pass/protocol_named_barrier_relay.rs"]
mod protocol_named_barrier_relay;
#[path = "pass/protocol_proxy_fence.rs"]
mod protocol_proxy_fence;
#[path = "pass/protocol_tmem_commit.rs"]
mod protocol_tmem_commit;
#[path = "pass/protocol_wait_in_branch.rs"]
mod protocol_wait_in_branch;

#[test]
fn accepted_forms_compile_and_run() {
    cluster_exchange::main();
    configs_and_launch::main().expect("the launch on the interpreter succeeds");
    protocol_carried_accumulator_wait::main();
    protocol_idioms::main();
    protocol_named_barrier_relay::main();
    protocol_proxy_fence::main();
    protocol_tmem_commit::main();
    protocol_wait_in_branch::main();
}
