import re,sys
s=open(sys.argv[1]).read()
m=re.search(r'assembly = "((?:[^"\\]|\\.)*)"',s)
t=m.group(1)
out=[];i=0
while i<len(t):
    c=t[i]
    if c=='\\':
        n=t[i+1]
        if n=='\\': out.append('\\'); i+=2
        elif n=='"': out.append('"'); i+=2
        else: out.append(chr(int(t[i+1:i+3],16))); i+=3
    else: out.append(c); i+=1
open(sys.argv[2],'w').write(''.join(out))
