from wm.cli.main import main

main()
