"""The simulated AWS: EC2's API (`ec2`), each VM's instance metadata service (`imds`)."""
