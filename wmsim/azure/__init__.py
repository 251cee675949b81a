"""The simulated Azure: ARM's compute and network API (`arm`), its deployments, template specs
and resource groups (`deployments`, `arm_templates`), each VM's IMDS (`imds`) and the attested
data it signs (`attested`)."""
