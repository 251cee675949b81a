"""The simulated Google Cloud: Compute Engine's API (`gce`), its catalogue of machine types,
images and networks (`catalog`), each VM's metadata server (`imds`)."""
