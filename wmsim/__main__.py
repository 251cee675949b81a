from wmsim.cli import main

main()
