# Session 41 (RESULTS run 49): per tile group, the work (time after the last wait) of tasks
# whose CTA last ran a task of another group ("cold") against those after one of their own
# ("warm"), from llama_bench --trace JSON files: python3 run49-coldwarm.py TRACE.json ...
import json,sys,collections,statistics as st
for f in sys.argv[1:]:
    d=json.load(open(f)); ev=d['traceEvents'] if isinstance(d,dict) else d
    tasks=[e for e in ev if e.get('ph')=='X' and e.get('cat')!='et.wait']
    waits={}
    for e in ev:
        if e.get('ph')=='X' and e.get('cat')=='et.wait': waits[(e['tid'],e['ts'])]=e['dur']
    cats=collections.Counter(e.get('cat') for e in ev if e.get('ph')=='X')
    by=collections.defaultdict(list)
    for t in tasks: by[t['tid']].append(t)
    res=collections.defaultdict(lambda:{'cold':[], 'warm':[], 'first':[], 'later':[]})
    for tid,ts in by.items():
        ts.sort(key=lambda t:t['ts'])
        prev=None; seen=set()
        for t in ts:
            g=t['cat']; w=waits.get((tid,t['ts']),0.0); work=t['dur']-w
            res[g]['warm' if prev==g else 'cold'].append(work)
            prev=g
    print(f, dict(cats))
    for g,r in res.items():
        c,w=r['cold'],r['warm']
        print(f"  {g:10s} cold n={len(c):5d} med {st.median(c) if c else 0:7.2f}   warm n={len(w):5d} med {st.median(w) if w else 0:7.2f}")
