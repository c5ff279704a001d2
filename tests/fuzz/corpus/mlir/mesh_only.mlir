sdy.mesh @mesh = <["x"=4, "y"=2]>
sdy.mesh @empty = <[]>
sdy.mesh @maximal = <[], device_ids=[0]>
