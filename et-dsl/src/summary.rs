//! A readable summary of a [`GraphSpec`]: what `et-dump` prints above the CUDA.

use std::fmt::Write;

use et_graph::{Access, Affine, Count, DimKind, EventAccess, GraphSpec, Index, ScheduleKind};

/// Dims, tensors, events with their trigger counts, and groups with their domains,
/// waits, signals and op tiles (index and extents), one item a line.
pub fn summary(spec: &GraphSpec) -> String {
    let dims: Vec<&str> = spec.dims.iter().map(|d| d.name.as_ref()).collect();
    let shape = |s: &[Affine], vars: &[&str]| -> String {
        s.iter().map(|x| x.display(vars, &dims).to_string()).collect::<Vec<_>>().join(", ")
    };
    let schedule = match spec.schedule {
        ScheduleKind::Static => "static",
        ScheduleKind::Dynamic => "dynamic",
    };
    let dim_list: Vec<String> = spec
        .dims
        .iter()
        .map(|d| match d.kind {
            DimKind::Static(v) => format!("{} = {v}", d.name),
            DimKind::Symbolic { max: Some(m) } => format!("{} <= {m}", d.name),
            DimKind::Symbolic { max: None } => d.name.to_string(),
        })
        .collect();
    let mut out = format!("megakernel `{}` (schedule {schedule})\ndims: {}", spec.name, dim_list.join(", "));
    out.push_str("\ntensors:\n");
    for t in spec.tensors.iter() {
        let r = if t.access == Access::Write { "&mut " } else { "&" };
        let _ = writeln!(out, "  {}: {r}{}[{}]", t.name, t.dtype, shape(&t.shape, &[]));
    }
    out.push_str("events:\n");
    for e in spec.events.iter() {
        let count = match &e.count {
            Count::Inferred => "inferred".to_string(),
            Count::Fixed(a) => a.display(&[], &dims).to_string(),
            Count::PerElement { tensor } => format!("dyn({})", spec.tensors[*tensor as usize].name),
        };
        let _ = writeln!(out, "  {}[{}], count {count}", e.name, shape(&e.shape, &[]));
    }
    out.push_str("groups:\n");
    for g in spec.groups.iter() {
        let vars: Vec<&str> = g.vars.iter().map(|v| v.as_ref()).collect();
        let condition = g.condition.as_ref().map_or(String::new(), |c| {
            let at: Vec<String> = c.at.iter().map(|x| x.display(&vars, &dims).to_string()).collect();
            format!(
                ", if {} {} {}[{}]",
                c.lhs.display(&vars, &dims),
                c.cmp.symbol(),
                spec.tensors[c.tensor as usize].name,
                at.join(", ")
            )
        });
        let _ = writeln!(
            out,
            "  {}[{}] in [{}], cost {}{condition}",
            g.name,
            vars.join(", "),
            shape(&g.domain, &vars),
            g.cost
        );
        for (what, list) in [("wait", &g.waits), ("signal", &g.signals)] {
            for a in list.iter() {
                let _ = writeln!(out, "    {what} {}", access(spec, a, &vars, &dims));
            }
        }
        // extents print by name where they are symbolic
        for t in g.tiles.iter() {
            let name = &spec.tensors[t.tensor as usize].name;
            let _ = writeln!(out, "    tile {name}[{}] sized [{}]", shape(&t.index, &vars), shape(&t.size, &vars));
        }
    }
    out
}

fn access(spec: &GraphSpec, a: &EventAccess, vars: &[&str], dims: &[&str]) -> String {
    let index: Vec<String> = a
        .index
        .iter()
        .map(|ix| match ix {
            Index::At(x) => x.display(vars, dims).to_string(),
            Index::Range { start, end } => format!("{} .. {}", start.display(vars, dims), end.display(vars, dims)),
            Index::All => "..".to_string(),
            Index::Data { tensor, at, along } => {
                let at: Vec<String> = at
                    .iter()
                    .enumerate()
                    .map(|(c, x)| match along {
                        Some((d, len)) if *d as usize == c => {
                            format!("{} .. {}", x.display(vars, dims), x.add(len).display(vars, dims))
                        }
                        _ => x.display(vars, dims).to_string(),
                    })
                    .collect();
                format!("{}[{}]", spec.tensors[*tensor as usize].name, at.join(", "))
            }
        })
        .collect();
    format!("{}[{}]", spec.events[a.event as usize].name, index.join(", "))
}
