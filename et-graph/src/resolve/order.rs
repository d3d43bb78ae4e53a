//! Kahn's topological order, the one copy: the resolved task graph, the group graph of
//! the compile-time rules, schedule validation and chaos orders all run it, differing
//! only in which ready node they take next ([`ReadySet`]).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{ResolveError, Resolved, TaskId};

/// Which ready node Kahn's algorithm takes next.
pub trait ReadySet {
    /// Adds a node whose predecessors are all ordered.
    fn push(&mut self, node: u32);
    /// Takes the next node to order, if any is ready.
    fn pop(&mut self) -> Option<u32>;
}

/// Smallest node first: a deterministic order.
impl ReadySet for BinaryHeap<Reverse<u32>> {
    fn push(&mut self, node: u32) {
        BinaryHeap::push(self, Reverse(node));
    }
    fn pop(&mut self) -> Option<u32> {
        BinaryHeap::pop(self).map(|Reverse(n)| n)
    }
}

/// Last pushed first: the cheapest policy, for a yes/no acyclicity test.
impl ReadySet for Vec<u32> {
    fn push(&mut self, node: u32) {
        Vec::push(self, node);
    }
    fn pop(&mut self) -> Option<u32> {
        Vec::pop(self)
    }
}

/// Kahn's algorithm over nodes `0..n` and edges `(before, after)`. Returns the order
/// and each node's remaining in-degree: the order is complete exactly when the graph is
/// acyclic, and a node with remaining in-degree is blocked behind a cycle.
pub fn kahn(n: usize, edges: impl IntoIterator<Item = (u32, u32)>, mut ready: impl ReadySet) -> (Vec<u32>, Vec<u32>) {
    let mut indegree = vec![0u32; n];
    let mut succ: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (a, b) in edges {
        succ[a as usize].push(b);
        indegree[b as usize] += 1;
    }
    (0..n as u32).filter(|&t| indegree[t as usize] == 0).for_each(|t| ready.push(t));
    let mut order = Vec::with_capacity(n);
    while let Some(t) = ready.pop() {
        order.push(t);
        for &s in &succ[t as usize] {
            indegree[s as usize] -= 1;
            if indegree[s as usize] == 0 {
                ready.push(s);
            }
        }
    }
    (order, indegree)
}

/// A cycle among the nodes Kahn's algorithm left blocked (`indegree > 0`; at least one
/// must be), found by walking back along blocked predecessors. Returned predecessor
/// first, rotated to start at its smallest node, and closed: the first node is repeated
/// at the end.
pub fn closed_cycle<I: IntoIterator<Item = u32>>(indegree: &[u32], preds: impl Fn(u32) -> I) -> Vec<u32> {
    let blocked = |t: u32| indegree[t as usize] > 0;
    let mut path = vec![(0..indegree.len() as u32).find(|&t| blocked(t)).unwrap_or(0)];
    loop {
        let cur = path[path.len() - 1];
        // a blocked node kept in-degree from an unordered, hence blocked, predecessor
        let Some(next) = preds(cur).into_iter().find(|&p| blocked(p)) else {
            return Vec::new();
        };
        if let Some(pos) = path.iter().position(|&p| p == next) {
            let mut cycle: Vec<u32> = path[pos..].iter().rev().copied().collect();
            let min = (0..cycle.len()).min_by_key(|&k| cycle[k]).unwrap_or(0);
            cycle.rotate_left(min);
            cycle.push(cycle[0]);
            return cycle;
        }
        path.push(next);
    }
}

impl Resolved<'_> {
    /// One topological order of the tasks, smallest ready task first; on a cycle, the
    /// tasks of one closed cycle (see [`closed_cycle`]).
    pub fn topological_order(&self) -> Result<Vec<TaskId>, Vec<TaskId>> {
        let edges = (0..self.n_tasks).flat_map(|t| self.dependencies(t).map(move |d| (d, t)));
        let (order, indegree) = kahn(self.n_tasks as usize, edges, BinaryHeap::new());
        if order.len() == self.n_tasks as usize {
            return Ok(order);
        }
        Err(closed_cycle(&indegree, |t| self.dependencies(t)))
    }

    /// The launch-time error for a cycle of tasks.
    pub(super) fn cycle_error(&self, cycle: &[TaskId]) -> ResolveError {
        ResolveError::Cycle { tasks: cycle.iter().map(|&t| self.describe_task(t)).collect() }
    }
}
