"""Shared set-up of the catch-all cases: inside the gateway namespace of a netns.Topology, a fake
upstream for api.example.test (echoing requests) and vaultgate listening where nftables
redirects or DNATs land (0.0.0.0:8443 and 0.0.0.0:8080), with a block-default vault."""
import netns
import vgtest as t


def start_gateway(topo, run_id, secret, audit="off"):
    """Moves this process into topo's gateway namespace (threads and children started from here
    on live there) and starts the upstream and vaultgate. Returns (up, vg)."""
    netns.enter(topo.gw_ns)
    d = t.tmpdir()
    certs = t.make_certs(d, ["api.example.test"])
    up = t.FakeUpstream(certs["cert"], certs["key"], t.echo_handler)
    vault = t.example_vault(run_id=run_id, default="block",
                            secrets={"API_KEY": {"value": secret}}, hosts={})
    vg = t.Vaultgate(d, vault, pins=[up.pin("api.example.test")], upstream_ca=certs["ca"],
                     audit=audit, http=True)
    vg.args[vg.args.index("--listen-https") + 1] = "0.0.0.0:8443"
    vg.args[vg.args.index("--listen-http") + 1] = "0.0.0.0:8080"
    vg.port, vg.http_port = 8443, 8080
    vg.start()
    return up, vg
