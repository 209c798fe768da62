from rtvox.cli import main

main()
