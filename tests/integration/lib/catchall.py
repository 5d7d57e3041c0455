"""Shared set-up of the catch-all cases: inside the gateway namespace of a netns.Topology, a fake
upstream for api.example.test (echoing requests) and vaultgate listening where nftables
redirects or DNATs land (0.0.0.0:8443 and 0.0.0.0:8080), with a block-default vault."""
import netns
import vgtest as t


def start_gateway(topo, run_id, secret, audit="off", allowed=(), extra=()):
    """Moves this process into topo's gateway namespace (threads and children started from here
    on live there) and starts the upstream and vaultgate. allowed: hosts the vault allows (the
    upstream answers for them too); extra: more `vaultgate run` arguments (listeners on [::],
    --listen-dns). Returns (up, vg)."""
    names = ["api.example.test"] + list(allowed)
    netns.enter(topo.gw_ns)
    d = t.tmpdir()
    certs = t.make_certs(d, names)
    up = t.FakeUpstream(certs["cert"], certs["key"], t.echo_handler)
    vault = t.example_vault(run_id=run_id, default="block",
                            secrets={"API_KEY": {"value": secret}},
                            hosts={h: "allow" for h in allowed})
    vg = t.Vaultgate(d, vault, pins=[up.pin(h) for h in names], upstream_ca=certs["ca"],
                     audit=audit, http=True, extra=extra)
    vg.args[vg.args.index("--listen-https") + 1] = "0.0.0.0:8443"
    vg.args[vg.args.index("--listen-http") + 1] = "0.0.0.0:8080"
    vg.port, vg.http_port = 8443, 8080
    vg.start()
    return up, vg
