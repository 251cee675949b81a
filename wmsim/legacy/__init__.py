"""A stand-in for a live Taskcluster worker-manager deployment: the one wm takes over.

`LegacyWorkerManager` (wmsim.legacy.manager) serves worker-manager's API over HTTP;
`LegacyProvisioner` (wmsim.legacy.provisioner) launches and scans its VMs on the simulated
clouds; `LegacyFleet` (wmsim.legacy.fleet) boots the simulated worker-runner on them."""
